"""Finding and reading BFCL's data files, and the single-turn samples built from them.

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
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_records
from genenv_cli.evals.base import EvalSample
from genenv_cli.evals.datasource import no_data_error, try_download
from genenv_cli.families.bfcl.categories import (
    ALIASES,
    COMMITS,
    GROUPS,
    MULTI_TURN_DOCS,
    OFFICIAL_CATEGORIES,
    PAPER_CATEGORY,
    RAW_URL,
    UNSUPPORTED,
    UNSUPPORTED_WHY,
    file_name,
    language_of,
)
from genenv_cli.families.bfcl.prompts import annotate_functions, prompt_messages

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


def _read_records_docs(path: Path) -> list[tuple[str, dict]]:
    """Function-document files: JSON lines of documents (they have no "id")."""
    out = json_records(path, 'BFCL function documents (objects with a "name")')
    for where, doc in out:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise InputError(f"{where}: expected a function document with a \"name\"")
    return out



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


def resolve_version(version: str | None, data: Path | None) -> str:
    """"v4" or "v3": as asked (`4`, `BFCL_v3` ...), else as the --data file names say, else v4."""
    if version is None or not str(version).strip():
        return (_detect_version(_data_root(data) if data.is_dir() else data) if data else None) or "v4"
    v = str(version).strip().lower().removeprefix("bfcl_").removeprefix("bfcl-")
    v = v if v.startswith("v") else "v" + v
    if v not in ("v3", "v4"):
        raise InputError(f"unknown BFCL version {version!r}; expected v4 (default) or v3")
    return v

def resolve_categories(split: str | None, protocol: str, data: Path | None) -> tuple[list[str], bool]:
    """(categories to load, whether they were asked for by name: then a missing file is an error)."""
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

def locate(data: Path | None, categories: list[str], explicit: bool, version: str, cache_dir: Path,
           sources: list[str]) -> tuple[Path, str, str, list[str]]:
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
    raise no_data_error("bfcl", sources, tried)


# ----------------------------------------------------------------------------- single-turn samples

def load_single_turn(root: Path, cat: str, version: str, read: list[Path]) -> list[EvalSample]:
    """The samples of one single-turn category (its files are added to `read`)."""
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

