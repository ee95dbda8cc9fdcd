"""The API-Bank benchmark as `genenv evaluate` runs it: loading (release_files.py, apis.py, prompts.py), scoring
(parsing.py, scoring.py) and the summary (summary.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, PaperColumn, Verdict
from genenv_cli.evals.datasource import no_data_error, sha256_paths
from genenv_cli.families.api_bank import scoring, summary
from genenv_cli.families.api_bank.apis import _catalog, _tool_schema
from genenv_cli.families.api_bank.prompts import _doc, _official_messages, _paper_messages, _result_output
from genenv_cli.families.api_bank.release_files import (
    COMMIT,
    HF_REPO,
    HF_REVISION,
    LEVELS,
    REPO,
    VERSION,
    _found_tools,
    _layout,
    _Point,
    download,
    read_points,
)


class APIBank(Benchmark):
    name = "api-bank"
    # the 99th percentile of the right answers over the level-1/2 dialogues is 110 SmolLM2 tokens (docs/domains.md,
    # "Output lengths"), rounded up to a multiple of 256
    answer_tokens = 256
    paper_column = PaperColumn(3, "API-Bank", summary.PAPER_REFERENCE)
    description = "API-Bank level-1/2 dialogues (level 3 when given): API-call accuracy per level"
    categories = list(LEVELS)
    sources = [
        f"GitHub {REPO} api-bank/lv1-lv2-samples and api-bank/apis at {COMMIT[:7]} (raw files, one by one)",
        f"Hugging Face dataset {HF_REPO} test-data/level-3.json at {HF_REVISION[:7]}",
        "--data PATH: the api-bank folder, lv1-lv2-samples, one level folder, a dialogue .jsonl or level-3.json",
    ]
    splits = ["all", *LEVELS]
    versions = [VERSION]

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
            root = download(cache_dir, tried)
            if root is None:
                raise no_data_error(self.name, self.sources, tried)
            lay, source, ver = _layout(root), f"{REPO}@{COMMIT[:7]} + {HF_REPO}@{HF_REVISION[:7]}", VERSION
        points, files = read_points(lay, source)
        docs, doc_files, origin = _catalog(points, lay.apis_dir)
        files.extend(doc_files)
        if split != "all":
            points = [point for point in points if point.level == split]
        if protocol == "paper":
            points = [point for point in points if point.call["api_name"] != "ToolSearcher"]
        if not points:
            raise InputError(f"{source}: no API calls to evaluate for split {split!r}.")
        samples = [point_sample(point, docs, protocol) for point in points]
        return LoadedData(samples=samples, version=f"{ver}; API docs: {origin}", source=source,
                          fingerprint=sha256_paths(files))

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        return scoring.score(sample, output, protocol)

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        return summary.summarize(samples, verdicts, protocol)


def point_sample(point: _Point, docs: dict[str, dict[str, Any]], protocol: str) -> EvalSample:
    """One evaluation point as a sample: its prompt, gold call, offered tools and parameter types."""
    if protocol == "paper":
        messages, offered = _paper_messages(point, docs)
    else:
        messages, offered = _official_messages(point, docs)
    gold: dict[str, Any] = {"name": point.call["api_name"], "arguments": point.call["param_dict"]}
    if point.call["api_name"] == "ToolSearcher":
        gold["retrieves"] = [d["name"] for d in _found_tools(_result_output(point.call))]
    spec = _doc(point, docs, point.call["api_name"]).get("input_parameters") or {}
    types = {k: str(v.get("type")) for k, v in spec.items() if isinstance(v, dict)}
    return EvalSample(id=point.id, category=point.level, messages=messages, gold=gold,
                      tools=[_tool_schema(_doc(point, docs, a)) for a in offered],
                      meta={"file": point.source, "api_index": point.k, "offered": offered, "param_types": types})
