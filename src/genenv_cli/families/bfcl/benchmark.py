"""The BFCL benchmark as `genenv evaluate` runs it: loading (release_files.py, multi_turn.py), scoring (scoring.py) and
the summary (summary.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, PaperColumn, Verdict
from genenv_cli.evals.datasource import sha256_paths
from genenv_cli.families.bfcl import scoring, summary
from genenv_cli.families.bfcl.categories import (
    COMMITS,
    OFFICIAL_CATEGORIES,
    PAPER_CATEGORY,
    PAPER_REFERENCE,
    UNSUPPORTED,
)
from genenv_cli.families.bfcl.multi_turn import load_multi_turn
from genenv_cli.families.bfcl.release_files import (
    load_single_turn,
    locate,
    resolve_categories,
    resolve_version,
)


class BFCL(Benchmark):
    name = "bfcl"
    # the 99th percentile of the right answers over the 12 single-turn files is 156 SmolLM2 tokens (docs/domains.md,
    # "Output lengths"), rounded up to a multiple of 256; a multi-turn turn's calls are of the same kind
    answer_tokens = 256
    paper_column = PaperColumn(2, "BFCL", PAPER_REFERENCE)
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


    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {protocol!r} for bfcl; expected one of {', '.join(PROTOCOLS)}")
        data = Path(data) if data is not None else None
        if data is not None and not data.exists():
            raise InputError(f"--data {data}: no such file or folder (expected a folder laid out like "
                             f"bfcl_eval/data, or one BFCL_v4_<category>.json question file)")
        version = resolve_version(version, data)
        categories, explicit = resolve_categories(split, protocol, data)
        root, label, source, present = locate(data, categories, explicit, version, cache_dir, self.sources)
        samples: list[EvalSample] = []
        read: list[Path] = []
        for cat in present:
            if cat == PAPER_CATEGORY:
                samples += load_multi_turn(root, version, read)
            else:
                samples += load_single_turn(root, cat, version, read)
        return LoadedData(samples=samples, version=label, source=source, fingerprint=sha256_paths(read))

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        return scoring.score(sample, output)

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        return summary.summarize(samples, verdicts, self.categories)
