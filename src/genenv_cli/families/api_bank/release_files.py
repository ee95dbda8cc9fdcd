"""Finding and reading API-Bank's data: the dialogues and level-3 samples, as evaluation points.

**Data.** `--data` may be the api-bank release folder (holding `lv1-lv2-samples/`, optionally `apis/` and
`test-data/level-3.json`), the `lv1-lv2-samples` folder, one level folder (`level-1-given-desc` -> level 1,
`level-2-toolsearcher` -> level 2, as `evaluator.py` decides by the folder name), one dialogue `.jsonl` (its
API descriptions from `apis/` two levels above its level folder, when there), or
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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_lines, json_records
from genenv_cli.evals.datasource import try_download

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
            apis = path.parent.parent.parent / "apis"  # lv1-lv2-samples/<level folder>/<file> -> api-bank/apis
            lay.apis_dir = apis if apis.is_dir() else None
        else:
            raise InputError(f"{path}: expected a dialogue .jsonl, level-3.json or a folder of them.")
        return lay
    if (path / "lv1-lv2-samples").is_dir():
        root, samples = path, path / "lv1-lv2-samples"
    elif any(_level_of_folder(sub.name) for sub in path.iterdir() if sub.is_dir()):
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
    for sub in sorted(sub for sub in samples.iterdir() if sub.is_dir()):
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
        for point in _points_from_dialogue(name, "level-3", turns):
            point.requirement = item["requirement"].strip()
            points.append(point)
    return points


def read_points(lay: _Layout, source: str) -> tuple[list[_Point], list[Path]]:
    """Every API call of the dialogues and level-3 samples found, and the files read."""
    points: list[_Point] = []
    files: list[Path] = []
    for level in ("level-1", "level-2"):
        for path in lay.level_files.get(level, []):
            points.extend(_points_from_dialogue(path.stem, level, _read_dialogue(path)))
            files.append(path)
    if lay.level3 is not None:
        points.extend(_read_level3(lay.level3))
        files.append(lay.level3)
    seen: set[str] = set()
    for point in points:
        if point.id in seen:
            raise InputError(f"{source}: two dialogues give the sample id {point.id!r}; dialogue file names "
                             f"must be unique across levels.")
        seen.add(point.id)
    return points, files


def download(cache_dir: Path, tried: list[str]) -> Path | None:
    """The api-bank folder downloaded into the cache (file by file; a marker records a complete download, so an
    interrupted one resumes), or None with the failures in `tried`."""
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
