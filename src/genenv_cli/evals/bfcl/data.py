"""BFCL (Berkeley Function Calling Leaderboard), v4 (default) and v3 data: the single-turn AST categories
scored by BFCL's AST checker rules, and the GenEnv paper's per-turn decomposition of `multi_turn_long_context`.

Official sources followed (ShishirPatil/gorilla, `berkeley-function-call-leaderboard/bfcl_eval/`):
`constants/default_prompts.py` + `model_handler/utils.py` (`formulate_system_prompt`,
`system_prompt_pre_processing_chat_model`) for the prompt; `utils.py`
(`_func_doc_language_specific_pre_processing`, `populate_test_cases_with_predefined_functions`) for the
function documents shown; `eval_checker/eval_runner.py` for which checker judges which category;
`eval_checker/eval_runner_helper.py` (`generate_leaderboard_csv`) for the summary scores. The decoder and the
AST rules are in `bfcl_checker.py` (its docstring lists them).

Data (`load`): BFCL's own files -- `BFCL_v4_<category>.json` question files (JSON lines despite the
extension: `id`, `question` = list of turns, each a list of `{role, content}`, `function` = function
documents) and `possible_answer/BFCL_v4_<category>.json` (`id`, `ground_truth`); v3 names its files
`BFCL_v3_<category>.json` and calls the simple categories `simple`, `java`, `javascript` (genenv reports all
versions under the v4 names `simple_python`, `simple_java`, `simple_javascript`). Looked for, in order:
`--data` (a folder laid out like `bfcl_eval/data`, or one question file); the cache
`<cache_dir>/<version>/`; the copy inside the `bfcl-eval` wheel when it is installed and holds that version
(found with `importlib.util.find_spec`, never imported); the files on GitHub at a pinned commit (`COMMITS`),
downloaded into the cache. The installed wheel comes before the network because it is an official, pinned,
offline copy. `--split` picks categories: `all` (default), `non_live`, `live`, `python`, `non_python`,
category names, or a comma-separated list.

Sample ids: BFCL's own `id` (`simple_python_12`, `live_multiple_3-1-0`; v3: `simple_12`, `java_3`); paper
protocol: `<bfcl id>#turn<k>`, k the 0-based turn index.

Prompt (BFCL's prompt mode, the default system prompt `ret_fmt=python&func_doc_fmt=json&prompt_fmt=plaintext&
style=classic`): one system message -- BFCL's instructions (kept in BFCL's own words, since the wording is
part of the protocol: answer only with `[func_name1(params_name1=params_value1, params_name2=params_value2...),
func_name2(params)]`, point out when no function fits or parameters are missing) followed by "Here is a
list of functions in json format that you can invoke." and the function documents (`json.dumps(indent=4)`;
v3 printed the Python list instead, and so does genenv for v3). Each document's description gets BFCL's
language note ("Note that the provided function is in Python 3 syntax." / Java 8 SDK / JavaScript); for
Java and JavaScript every parameter is shown as type "string" with its real type named in its description,
as BFCL does. A system message in the question (live data) is appended after a blank line; then the
question's messages. `EvalSample.tools` holds the same (annotated) documents for export; they are already in
the prompt (`meta["tools_in_prompt"]`), so a runner should not hand them to the chat template again.
The answer parser (`bfcl_checker.decode_answer`): BFCL's prompting decoder, with genenv's
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` format accepted too.

Scoring (official): AST categories by `bfcl_checker.check_calls` (simple_python, simple_java,
simple_javascript, multiple, parallel, parallel_multiple, live_simple, live_multiple, live_parallel,
live_parallel_multiple); `irrelevance` and `live_irrelevance` pass when no call can be decoded (or the
decoded list is empty); `live_relevance` passes when at least one call is decoded. Summary, as the
leaderboard computes it: simple = unweighted mean of simple_python/java/javascript; non-live AST =
unweighted mean of simple, multiple, parallel, parallel_multiple; live AST = mean weighted by item count
over the four live AST categories; irrelevance = unweighted mean of irrelevance and live_irrelevance;
relevance = live_relevance. v4's "Non-Live" and "Live" columns are the AST scores; v3's also took in
irrelevance (unweighted) and live irrelevance + relevance (weighted). A score that needs a category that was
not loaded is left out and named under "incomplete". Multi-turn, memory, web-search and format-sensitivity
categories are not supported yet (`unsupported_categories`; BFCL scores them by executing the calls in its
simulated backends or with an agent loop).

Paper protocol (`--protocol paper`, the GenEnv paper's Table 1 "BFCL" column): `multi_turn_long_context`
(200 dialogues, 734 turns in v4) with each turn scored on its own. The messages for turn k: the system
prompt above with the documents of the dialogue's `involved_classes` (from `multi_turn_func_doc/`); then for
each earlier turn j < k its user message(s) and one assistant message holding turn j's ground-truth calls in
BFCL syntax (`[cd(folder='document'), mkdir(dir_name='temp')]`, positional arguments written as keywords;
`[]` for a turn whose ground truth is empty); then turn k's user message(s). No execution results are in the
history: they exist only in BFCL's simulated backends (which also hold the "long context", so this
decomposition does not see it). The answer is decoded as above and compared with turn k's ground-truth calls
(parsed from BFCL's call strings as data; positional arguments are named in the order of the function
document's parameters). Match rule: the same multiset of calls -- same function name (a `Class.` prefix is
dropped), same arguments after dropping those equal to the documented default ("None" meaning None), numbers
compared by value (1 == 1.0), tuples as lists, strings exactly. A turn with empty ground truth passes when the
answer holds no call. `ordered` in the per-sample scores also requires the same order. Accuracy = correct
turns / turns. Paper numbers for reference: GenEnv 7B 41.8, Qwen2.5-7B-Instruct 7.0.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_cli.errors import InputError
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, Verdict
from genenv_cli.evals.bfcl_checker import (
    BCall,
    DecodeError,
    check_calls,
    decode_answer,
    decode_python,
    json_safe,
    positional_value,
    standardize_string,
)
from genenv_cli.evals.datasource import no_data_error, sha256_paths, try_download
from genenv_cli.pools import json_records

__all__ = ["BFCL", "standardize_string", "system_prompt", "annotate_functions", "AST_CATEGORIES"]

# ----------------------------------------------------------------------------- categories

NON_LIVE = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
            "irrelevance"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance"]
OFFICIAL_CATEGORIES = NON_LIVE + LIVE
AST_CATEGORIES = [c for c in OFFICIAL_CATEGORIES if "relevance" not in c]
PAPER_CATEGORY = "multi_turn_long_context"

GROUPS = {
    "all": OFFICIAL_CATEGORIES,
    "non_live": NON_LIVE,
    "live": LIVE,
    "python": [c for c in OFFICIAL_CATEGORIES if c not in ("simple_java", "simple_javascript")],
    "non_python": ["simple_java", "simple_javascript"],
}
V3_NAMES = {"simple_python": "simple", "simple_java": "java", "simple_javascript": "javascript"}
ALIASES = {v: k for k, v in V3_NAMES.items()}

UNSUPPORTED = {
    "v4": ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
           "memory_kv", "memory_vector", "memory_rec_sum", "web_search_base", "web_search_no_snippet",
           "format_sensitivity"],
    "v3": ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"],
}
UNSUPPORTED_WHY = ("not supported yet: BFCL scores multi-turn, memory and web-search categories by executing "
                   "the calls in its simulated backends (or an agent loop), and format_sensitivity by "
                   "re-running the AST categories under other prompt formats; multi_turn_long_context is "
                   "available per turn with --protocol paper")

# GitHub commits whose data are the versions genenv downloads: v4 = the state shipped in bfcl-eval
# 2026.3.23; v3 = the last commit before the v4 release renamed the files.
COMMITS = {"v4": "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8", "v3": "cd9429ccf3d4d04156affe883c495b3b047e6b64"}
RAW_URL = ("https://raw.githubusercontent.com/ShishirPatil/gorilla/{commit}/"
           "berkeley-function-call-leaderboard/bfcl_eval/data/{path}")

MULTI_TURN_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}

PAPER_REFERENCE = {"GenEnv 7B": 41.8, "Qwen2.5-7B-Instruct": 7.0}


def language_of(category: str) -> str:
    if category == "simple_java":
        return "java"
    if category == "simple_javascript":
        return "javascript"
    return "python"


def checker_kind(category: str) -> str:
    """Which AST check BFCL applies (it dispatches on the category's name)."""
    if "parallel" in category:
        return "parallel"
    if "multiple" in category:
        return "multiple"
    return "simple"


def file_name(category: str, version: str) -> str:
    return f"BFCL_{version}_{V3_NAMES.get(category, category) if version == 'v3' else category}.json"


# ----------------------------------------------------------------------------- prompt

_INSTRUCTIONS = [
    # BFCL's "classic" prompt style, plaintext template; its wording is kept (see the module docstring).
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. "
    "If none of the functions can be used, point it out. If the given question lacks the parameters "
    "required by the function, also point it out.",
    "You should only return the function calls in your response.",
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]. "
    "You SHOULD NOT include any other text in the response.",
    "At each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of "
    "your ability. Once you have no more functions to call, the system will consider the current turn "
    "complete and proceed to the next turn or task.",
]


def system_prompt(functions: list[dict], version: str = "v4") -> str:
    """BFCL's default prompt-mode system prompt with the (already annotated) function documents."""
    listing = json.dumps(functions, indent=4) if version != "v3" else str(functions)
    tools = f"Here is a list of functions in {'JSON' if version == 'v3' else 'json'} format that you can invoke.\n{listing}\n"
    return "\n\n".join([*_INSTRUCTIONS, tools])


_HINT = {"python": " Note that the provided function is in Python 3 syntax.",
         "java": " Note that the provided function is in Java 8 SDK syntax.",
         "javascript": " Note that the provided function is in JavaScript syntax."}


def annotate_functions(functions: list[dict], language: str) -> list[dict]:
    """The documents as BFCL shows them: a language note on each description; for Java/JavaScript every
    parameter becomes type "string" with its real type (and element type / dict schema) in its description."""
    docs = copy.deepcopy(functions)
    noun = "Java" if language == "java" else "JavaScript"
    for doc in docs:
        doc["description"] = str(doc.get("description", "")) + _HINT[language]
        if language == "python":
            continue
        props = (doc.get("parameters") or {}).get("properties") or {}
        for spec in props.values():
            kind = spec.get("type")
            spec["description"] = str(spec.get("description", ""))
            if kind == "any":
                spec["description"] += f" This parameter can be of any type of {noun} object in string representation."
            else:
                spec["description"] += f" This is {noun} {kind} type parameter in string representation."
            list_kinds = ("ArrayList", "Array") if language == "java" else ("array",)
            if kind in list_kinds and "items" in spec:
                spec["description"] += (f" The list elements are of type {spec['items'].get('type')}; they are "
                                        f"not in string representation.")
                del spec["items"]
            if language == "javascript" and kind == "dict" and "properties" in spec:
                spec["description"] += (" The dictionary entries have the following schema; they are not in "
                                        f"string representation. {json.dumps(spec['properties'])}")
                del spec["properties"]
            spec["type"] = "string"
    return docs


def prompt_messages(question_turn: list[dict], functions: list[dict], version: str) -> list[dict[str, str]]:
    """System prompt (merged with the question's own system message, as BFCL does) + the turn's messages."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in question_turn]
    head = system_prompt(functions, version)
    if msgs and msgs[0]["role"] == "system":
        msgs[0]["content"] = head + "\n\n" + msgs[0]["content"]
    else:
        msgs.insert(0, {"role": "system", "content": head})
    return msgs


# ----------------------------------------------------------------------------- reading files


def _read_records(path: Path) -> list[tuple[str, dict]]:
    """(where, record) pairs of a BFCL file: JSON lines (a JSON list is accepted too), each an object with an id."""
    out = json_records(path, 'BFCL records (objects with an "id")')
    for where, rec in out:
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise InputError(f"{where}: expected a JSON object with a string \"id\", got {str(rec)[:80]!r}")
    return out


def _check_question(where: str, rec: dict, need_functions: bool) -> None:
    turns = rec.get("question")
    ok = isinstance(turns, list) and turns and all(
        isinstance(t, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                    and isinstance(m.get("content"), str) for m in t) for t in turns)
    if not ok or not turns[0]:
        raise InputError(f"{where} (id {rec['id']}): \"question\" must be a list of turns, each a "
                         f"list of {{\"role\", \"content\"}} messages, the first turn not empty")
    if need_functions:
        funcs = rec.get("function")
        if not isinstance(funcs, list) or not all(
                isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("parameters"), dict)
                and isinstance(f["parameters"].get("properties", {}), dict) for f in funcs):
            raise InputError(f"{where} (id {rec['id']}): \"function\" must be a list of function "
                             f"documents with \"name\" and \"parameters\" (with \"properties\")")


def _check_answer(where: str, rec: dict, multi_turn: bool) -> None:
    gt = rec.get("ground_truth")
    if multi_turn:
        ok = isinstance(gt, list) and all(isinstance(t, list) and all(isinstance(s, str) for s in t) for t in gt)
        what = "a list of turns, each a list of call strings"
    else:
        ok = isinstance(gt, list) and gt and all(
            isinstance(a, dict) and len(a) == 1 and isinstance(next(iter(a.values())), dict) for a in gt)
        what = "a non-empty list of {function name: {parameter: [allowed values]}}"
    if not ok:
        raise InputError(f"{where} (id {rec['id']}): \"ground_truth\" must be {what}")


# ----------------------------------------------------------------------------- locating the data


def wheel_data_dir() -> Path | None:
    """`bfcl_eval/data` of an installed bfcl-eval wheel, found without importing bfcl_eval."""
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data"
    return path if path.is_dir() else None


def _wheel_version() -> str:
    for dist in ("bfcl-eval", "bfcl_eval"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown version"


def _needed_files(categories: list[str], version: str) -> list[str]:
    rels = []
    for cat in categories:
        rels.append(file_name(cat, version))
        if "relevance" not in cat:
            rels.append("possible_answer/" + file_name(cat, version))
    if PAPER_CATEGORY in categories:
        rels += [f"multi_turn_func_doc/{f}" for f in MULTI_TURN_DOCS.values()]
    return rels


def _detect_version(data: Path) -> str | None:
    names = [data.name] if data.is_file() else [p.name for p in data.glob("BFCL_v*_*.json")]
    for version in ("v4", "v3"):
        if any(name.startswith(f"BFCL_{version}_") for name in names):
            return version
    return None


def _data_root(data: Path) -> Path:
    """The folder holding BFCL_* files: `data` itself or a bfcl_eval/data-like folder inside it."""
    for cand in (data, data / "data", data / "bfcl_eval" / "data",
                 data / "berkeley-function-call-leaderboard" / "bfcl_eval" / "data"):
        if cand.is_dir() and any(cand.glob("BFCL_v*_*.json")):
            return cand
    return data


class BFCL(Benchmark):
    name = "bfcl"
    description = ("Berkeley Function Calling Leaderboard: single-turn AST categories (python, java, "
                   "javascript, live) and irrelevance/relevance; --protocol paper scores multi_turn_long_context "
                   "turn by turn")
    categories = [*OFFICIAL_CATEGORIES, PAPER_CATEGORY]
    sources = [
        "--data PATH: a folder laid out like bfcl_eval/data (BFCL_v4_<category>.json + possible_answer/), or "
        "one question file",
        "the bfcl-eval wheel's bfcl_eval/data when installed (pip install --no-deps bfcl-eval; 2026.x: v4, "
        "2025.8.6.2: v3)",
        "GitHub ShishirPatil/gorilla berkeley-function-call-leaderboard/bfcl_eval/data at "
        f"v4 {COMMITS['v4'][:7]} / v3 {COMMITS['v3'][:7]}, cached under GENENV_CACHE",
    ]
    splits = ["all", "non_live", "live", "python", "non_python", PAPER_CATEGORY, *OFFICIAL_CATEGORIES]
    versions = ["v4", "v3"]
    unsupported_categories = UNSUPPORTED

    # ------------------------------------------------------------------ load

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {protocol!r} for bfcl; expected one of {', '.join(PROTOCOLS)}")
        data = Path(data) if data is not None else None
        if data is not None and not data.exists():
            raise InputError(f"--data {data}: no such file or folder (expected a folder laid out like "
                             f"bfcl_eval/data, or one BFCL_v4_<category>.json question file)")
        version = self._version(version, data)
        categories, explicit = self._categories(split, protocol, data)
        root, label, source, present = self._locate(data, categories, explicit, version, cache_dir)
        samples: list[EvalSample] = []
        read: list[Path] = []
        for cat in present:
            if cat == PAPER_CATEGORY:
                samples += self._load_multi_turn(root, version, read)
            else:
                samples += self._load_single_turn(root, cat, version, read)
        return LoadedData(samples=samples, version=label, source=source, fingerprint=sha256_paths(read))

    @staticmethod
    def _version(version: str | None, data: Path | None) -> str:
        if version is None or not str(version).strip():
            return (_detect_version(_data_root(data) if data.is_dir() else data) if data else None) or "v4"
        v = str(version).strip().lower().removeprefix("bfcl_").removeprefix("bfcl-")
        v = v if v.startswith("v") else "v" + v
        if v not in ("v3", "v4"):
            raise InputError(f"unknown BFCL version {version!r}; expected v4 (default) or v3")
        return v

    @staticmethod
    def _categories(split: str | None, protocol: str, data: Path | None) -> tuple[list[str], bool]:
        if protocol == "paper":
            if split not in (None, "", "all", PAPER_CATEGORY):
                raise InputError(f"--split {split!r}: the paper protocol scores only {PAPER_CATEGORY}")
            return [PAPER_CATEGORY], True
        if data is not None and data.is_file():
            m = re.fullmatch(r"BFCL_v\d+_(.+)\.json", data.name)
            cat = ALIASES.get(m.group(1), m.group(1)) if m else None
            if cat not in OFFICIAL_CATEGORIES:
                raise InputError(f"--data {data}: a single file must be a question file named like "
                                 f"BFCL_v4_<category>.json, with category one of {', '.join(OFFICIAL_CATEGORIES)}")
            if split not in (None, "", "all", cat):
                raise InputError(f"--split {split!r} does not match the --data file {data.name} (category {cat})")
            return [cat], True
        if not split or split == "all":
            return list(OFFICIAL_CATEGORIES), False
        cats: list[str] = []
        for part in (p.strip() for p in split.split(",")):
            if not part:
                continue
            part = ALIASES.get(part, part)
            if part in GROUPS:
                cats += GROUPS[part]
            elif part in OFFICIAL_CATEGORIES:
                cats.append(part)
            elif part == PAPER_CATEGORY or part in UNSUPPORTED["v4"]:
                raise InputError(f"--split {part}: {UNSUPPORTED_WHY}")
            else:
                raise InputError(f"--split {part!r}: unknown BFCL category; expected one of "
                                 f"{', '.join(list(GROUPS) + OFFICIAL_CATEGORIES)}")
        return [c for c in OFFICIAL_CATEGORIES if c in cats], True

    def _locate(self, data: Path | None, categories: list[str], explicit: bool, version: str,
                cache_dir: Path) -> tuple[Path, str, str, list[str]]:
        """(folder, version label, source, categories present)."""
        if data is not None:
            root = data.parent if data.is_file() else _data_root(data)
            present = []
            for cat in categories:
                if (root / file_name(cat, version)).is_file():
                    present.append(cat)
                elif explicit:
                    raise InputError(f"--data {data}: missing {root / file_name(cat, version)} for category "
                                     f"{cat} (BFCL {version} file names)")
            if not present:
                raise InputError(f"--data {data}: no BFCL {version} question files found (expected names like "
                                 f"{file_name('simple_python', version)} and possible_answer/ beside them)")
            return root, f"{version} (local files)", str(data), present
        rels = _needed_files(categories, version)
        cached = Path(cache_dir) / version
        label = f"{version} (gorilla@{COMMITS[version][:7]})"
        base = RAW_URL.format(commit=COMMITS[version], path="")
        if all((cached / r).is_file() for r in rels):
            return cached, label, base, categories
        tried: list[str] = []
        wheel = wheel_data_dir()
        if wheel is not None:
            if all((wheel / r).is_file() for r in rels):
                return wheel, f"{version} (bfcl-eval {_wheel_version()})", str(wheel), categories
            tried.append(f"bfcl-eval {_wheel_version()} at {wheel} does not hold the {version} files")
        for rel in rels:
            if try_download(RAW_URL.format(commit=COMMITS[version], path=rel), cached / rel, tried) is None:
                break
        else:
            return cached, label, base, categories
        raise no_data_error("bfcl", self.sources, tried)

    # ------------------------------------------------------------------ single-turn

    def _load_single_turn(self, root: Path, cat: str, version: str, read: list[Path]) -> list[EvalSample]:
        qpath = root / file_name(cat, version)
        questions = _read_records(qpath)
        read.append(qpath)
        answers: dict[str, Any] = {}
        if "relevance" not in cat:
            apath = root / "possible_answer" / file_name(cat, version)
            if not apath.is_file():
                raise InputError(f"missing possible answers {apath} for {qpath} (BFCL keeps them in "
                                 f"possible_answer/ beside the question files)")
            for where, rec in _read_records(apath):
                _check_answer(where, rec, multi_turn=False)
                answers[rec["id"]] = rec["ground_truth"]
            read.append(apath)
        language = language_of(cat)
        samples = []
        for where, rec in questions:
            _check_question(where, rec, need_functions=True)
            if "relevance" in cat:
                gold: Any = {"expect": "no_call" if "irrelevance" in cat else "any_call"}
            else:
                if rec["id"] not in answers:
                    raise InputError(f"{where}: id {rec['id']} has no possible answer in "
                                     f"{root / 'possible_answer' / file_name(cat, version)}")
                gold = {"possible_answer": answers[rec["id"]]}
            shown = annotate_functions(rec["function"], language)
            samples.append(EvalSample(
                id=rec["id"], category=cat, messages=prompt_messages(rec["question"][0], shown, version),
                gold=gold, tools=shown,
                meta={"functions": rec["function"], "language": language, "version": version,
                      "tools_in_prompt": True}))
        return samples

    # ------------------------------------------------------------------ multi-turn (paper protocol)

    def _load_multi_turn(self, root: Path, version: str, read: list[Path]) -> list[EvalSample]:
        qpath = root / file_name(PAPER_CATEGORY, version)
        apath = root / "possible_answer" / file_name(PAPER_CATEGORY, version)
        if not apath.is_file():
            raise InputError(f"missing ground truth {apath} for {qpath}")
        questions = _read_records(qpath)
        answers = {}
        for where, rec in _read_records(apath):
            _check_answer(where, rec, multi_turn=True)
            answers[rec["id"]] = (where, rec["ground_truth"])
        read += [qpath, apath]
        docs_cache: dict[str, list[dict]] = {}
        samples = []
        for where, rec in questions:
            _check_question(where, rec, need_functions=False)
            classes = rec.get("involved_classes")
            if not isinstance(classes, list) or not all(c in MULTI_TURN_DOCS for c in classes):
                raise InputError(f"{where} (id {rec['id']}): \"involved_classes\" must list BFCL "
                                 f"API classes ({', '.join(MULTI_TURN_DOCS)})")
            functions: list[dict] = []
            for cls in classes:
                if cls not in docs_cache:
                    dpath = root / "multi_turn_func_doc" / MULTI_TURN_DOCS[cls]
                    if not dpath.is_file():
                        raise InputError(f"missing function documents {dpath} (needed by {rec['id']})")
                    docs_cache[cls] = [r for _, r in _read_records_docs(dpath)]
                    read.append(dpath)
                functions += docs_cache[cls]
            if rec["id"] not in answers:
                raise InputError(f"{where}: id {rec['id']} has no ground truth in {apath}")
            answer_at, truth = answers[rec["id"]]
            if len(truth) != len(rec["question"]):
                raise InputError(f"{answer_at} (id {rec['id']}): {len(truth)} ground-truth turns for "
                                 f"{len(rec['question'])} question turns")
            by_name = {f["name"]: f for f in functions}
            gold_turns = []
            for k, turn in enumerate(truth):
                calls = []
                for s in turn:
                    try:
                        parsed = decode_python(s)
                    except DecodeError as exc:
                        raise InputError(f"{answer_at} (id {rec['id']}), turn {k}: cannot parse "
                                         f"ground-truth call {s!r} ({exc})") from None
                    calls += [_named(c, by_name) for c in parsed]
                gold_turns.append(calls)
            shown = annotate_functions(functions, "python")
            head = system_prompt(shown, version)
            history: list[dict[str, str]] = [{"role": "system", "content": head}]
            for k, turn_msgs in enumerate(rec["question"]):
                user = [{"role": m["role"], "content": m["content"]} for m in turn_msgs]
                if user and user[0]["role"] == "system":  # BFCL merges a question system message
                    history[0]["content"] += "\n\n" + user.pop(0)["content"]
                messages = history + user
                samples.append(EvalSample(
                    id=f"{rec['id']}#turn{k}", category=PAPER_CATEGORY, messages=copy.deepcopy(messages),
                    gold={"calls": [c.to_json() for c in gold_turns[k]], "ground_truth": truth[k]},
                    tools=shown,
                    meta={"functions": functions, "language": "python", "version": version,
                          "bfcl_id": rec["id"], "turn": k, "tools_in_prompt": True}))
                history = messages + [{"role": "assistant", "content": render_calls(gold_turns[k])}]
        return samples

    # ------------------------------------------------------------------ scoring

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        if sample.category == PAPER_CATEGORY:
            return _score_turn(sample, output)
        cat = sample.category
        if "relevance" in cat:
            try:
                calls, _ = decode_answer(output, "python")
                parsed: Any = [c.to_json() for c in calls]
                has_call = bool(calls)
                why = "the answer decodes to an empty list of calls" if not calls else ""
            except DecodeError as exc:
                parsed, has_call, why = None, False, str(exc)
            if "irrelevance" in cat:
                return Verdict(not has_call, parsed, "" if not has_call else
                               "[irrelevance_error:decoder_success] Valid syntax. Successfully decoded a "
                               "function call when it should not.", {"accuracy": float(not has_call)})
            return Verdict(has_call, parsed, "" if has_call else
                           f"[relevance_error:decoder_failed] No function call decoded: {why}",
                           {"accuracy": float(has_call)})
        language = sample.meta.get("language", language_of(cat))
        try:
            calls, _ = decode_answer(output, language)
        except DecodeError as exc:
            return Verdict(False, None, f"[ast_decoder:decoder_failed] Invalid syntax. Failed to decode AST. "
                                        f"{exc}", {"accuracy": 0.0})
        ok, reason = check_calls(sample.meta["functions"], calls, sample.gold["possible_answer"], language,
                                 checker_kind(cat))
        return Verdict(ok, [c.to_json() for c in calls], reason, {"accuracy": float(ok)})

    # ------------------------------------------------------------------ summary

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        if len(samples) != len(verdicts):
            raise ValueError(f"{len(samples)} samples but {len(verdicts)} verdicts")
        version = samples[0].meta.get("version", "v4") if samples else "v4"
        tally: dict[str, list[int]] = {}
        ordered: dict[str, list[int]] = {}
        for s, v in zip(samples, verdicts, strict=True):
            t = tally.setdefault(s.category, [0, 0])
            t[0] += int(v.correct)
            t[1] += 1
            if s.category == PAPER_CATEGORY:
                o = ordered.setdefault(s.category, [0, 0])
                o[0] += int(v.scores.get("ordered", 0.0) >= 1.0)
                o[1] += 1
        order = [c for c in self.categories if c in tally] + sorted(c for c in tally if c not in self.categories)
        cats = {c: {"accuracy": 100.0 * tally[c][0] / tally[c][1], "correct": tally[c][0], "n": tally[c][1]}
                for c in order}
        total = sum(t[1] for t in tally.values())
        overall: dict[str, Any] = {
            "accuracy": 100.0 * sum(t[0] for t in tally.values()) / total if total else 0.0, "n": total}
        result: dict[str, Any] = {"overall": overall, "categories": cats, "version": version}
        if PAPER_CATEGORY in tally:
            o = ordered[PAPER_CATEGORY]
            cats[PAPER_CATEGORY]["ordered_accuracy"] = 100.0 * o[0] / o[1]
            overall["ordered_accuracy"] = 100.0 * o[0] / o[1]
            overall["dialogues"] = len({s.meta.get("bfcl_id") for s in samples if s.category == PAPER_CATEGORY})
            result["paper_reference"] = dict(PAPER_REFERENCE)
            result["protocol_note"] = ("GenEnv paper protocol: multi_turn_long_context, each turn scored on its "
                                       "own given the gold history; accuracy = correct turns / turns")
        incomplete: dict[str, list[str]] = {}

        def acc(cat: str) -> float | None:
            return cats[cat]["accuracy"] if cat in cats else None

        def unweighted(name: str, parts: list[str | float | None]) -> float | None:
            vals = [acc(p) if isinstance(p, str) else p for p in parts]
            missing = [p for p, v in zip(parts, vals, strict=True) if v is None and isinstance(p, str)]
            if any(v is None for v in vals):
                if missing:
                    incomplete[name] = missing
                return None
            return sum(vals) / len(vals)

        def weighted(name: str, parts: list[str]) -> float | None:
            missing = [p for p in parts if p not in cats]
            if missing:
                incomplete[name] = missing
                return None
            n = sum(cats[p]["n"] for p in parts)
            return sum(cats[p]["accuracy"] * cats[p]["n"] for p in parts) / n

        if any(c in tally for c in OFFICIAL_CATEGORIES):
            simple = unweighted("simple_ast_acc", ["simple_python", "simple_java", "simple_javascript"])
            if simple is None:
                incomplete["non_live_ast_acc"] = list(incomplete["simple_ast_acc"])
                non_live_ast = None
                for p in ("multiple", "parallel", "parallel_multiple"):
                    if p not in cats:
                        incomplete["non_live_ast_acc"].append(p)
            else:
                non_live_ast = unweighted("non_live_ast_acc", [simple, "multiple", "parallel",
                                                              "parallel_multiple"])
            live_parts = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
            live_ast = weighted("live_ast_acc", live_parts)
            irrelevance = unweighted("irrelevance_acc", ["irrelevance", "live_irrelevance"])
            relevance = acc("live_relevance")
            if relevance is None:
                incomplete["relevance_acc"] = ["live_relevance"]
            if version == "v3":
                non_live = (unweighted("non_live_acc", [simple, "multiple", "parallel", "parallel_multiple",
                                                        "irrelevance"]) if simple is not None else None)
                if simple is None:
                    incomplete["non_live_acc"] = incomplete["non_live_ast_acc"] + (
                        [] if "irrelevance" in cats else ["irrelevance"])
                live = weighted("live_acc", [*live_parts, "live_irrelevance", "live_relevance"])
            else:
                non_live, live = non_live_ast, live_ast
                if non_live is None:
                    incomplete["non_live_acc"] = incomplete["non_live_ast_acc"]
                if live is None:
                    incomplete["live_acc"] = incomplete["live_ast_acc"]
            for key, val in (("non_live_acc", non_live), ("live_acc", live), ("non_live_ast_acc", non_live_ast),
                             ("simple_ast_acc", simple), ("live_ast_acc", live_ast),
                             ("irrelevance_acc", irrelevance), ("relevance_acc", relevance)):
                if val is not None:
                    overall[key] = val
            result["summary_rules"] = (
                "simple = mean(simple_python, simple_java, simple_javascript); non_live_ast = mean(simple, "
                "multiple, parallel, parallel_multiple); live_ast = count-weighted mean of the four live AST "
                "categories; irrelevance = mean(irrelevance, live_irrelevance); relevance = live_relevance; "
                + ("v3: non_live adds irrelevance (unweighted), live adds live_irrelevance and live_relevance "
                   "(weighted); accuracy = all items pooled" if version == "v3" else
                   "v4: non_live = non_live_ast, live = live_ast; accuracy = all items pooled"))
        if incomplete:
            result["incomplete"] = {k: sorted(set(v)) for k, v in incomplete.items()}
        result["not_supported"] = {"categories": list(UNSUPPORTED.get(version, UNSUPPORTED["v4"])),
                                   "why": UNSUPPORTED_WHY}
        return result


def _read_records_docs(path: Path) -> list[tuple[str, dict]]:
    """Function-document files: JSON lines of documents (they have no "id")."""
    out = json_records(path, 'BFCL function documents (objects with a "name")')
    for where, doc in out:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise InputError(f"{where}: expected a function document with a \"name\"")
    return out


# ----------------------------------------------------------------------------- multi-turn helpers


def _named(call: BCall, docs: dict[str, dict]) -> BCall:
    """The call with its function name resolved (`Class.method` -> `method` when only the method is
    documented) and positional arguments named in the order of the document's parameters."""
    name = call.name
    if name not in docs and "." in name and name.rsplit(".", 1)[1] in docs:
        name = name.rsplit(".", 1)[1]
    args = dict(call.args)
    if call.positional:
        props = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
        for i, node in enumerate(call.positional):
            key = props[i] if i < len(props) else f"<positional {i}>"
            if key in args:
                key = f"<positional {i}>"
            args[key] = positional_value(node)
    return BCall(name, args)


def _canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return repr(value)


def _call_key(call: BCall, docs: dict[str, dict]) -> str:
    props = ((docs.get(call.name) or {}).get("parameters") or {}).get("properties") or {}
    args = {}
    for key, value in call.args.items():
        spec = props.get(key)
        if isinstance(spec, dict) and "default" in spec:
            default = None if spec["default"] == "None" else spec["default"]
            if _canon(value) == _canon(default):
                continue
        args[str(key)] = _canon(value)
    return json.dumps([call.name, args], sort_keys=True, default=repr)


def render_calls(calls: list[BCall]) -> str:
    """Calls in BFCL's answer syntax: `[f(a=1, b='x'), g()]`."""
    return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.args.items())})"
                           for c in calls) + "]"


def _score_turn(sample: EvalSample, output: str) -> Verdict:
    docs = {f["name"]: f for f in sample.meta["functions"]}
    gold = [BCall(c["name"], c["arguments"]) for c in sample.gold["calls"]]
    try:
        calls, _ = decode_answer(output, "python")
        calls = [_named(c, docs) for c in calls]
        parsed: Any = [c.to_json() for c in calls]
        why = ""
    except DecodeError as exc:
        calls, parsed, why = [], None, str(exc)
    want = [_call_key(c, docs) for c in gold]
    got = [_call_key(c, docs) for c in calls]
    correct = Counter(want) == Counter(got)
    ordered = want == got
    if correct:
        reason = ""
    elif not calls and why:
        reason = f"no call decoded ({why}); expected {len(gold)} call(s)"
    else:
        missing = list((Counter(want) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(want)).elements())
        parts = []
        if missing:
            parts.append("missing " + "; ".join(_show(k) for k in missing))
        if extra:
            parts.append("unexpected " + "; ".join(_show(k) for k in extra))
        reason = ", ".join(parts)
    return Verdict(correct, json_safe(parsed), reason, {"accuracy": float(correct), "ordered": float(ordered)})


def _show(key: str) -> str:
    name, args = json.loads(key)
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
