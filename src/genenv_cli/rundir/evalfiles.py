"""Evaluation results in a run: how `genenv evaluate` names them (`evals/<bench>/<tag><suffix>.json` and
`.samples.jsonl` beside it) and reading one back, checked for the keys its readers use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import read_regular


def model_tag(name: str) -> str:
    """A model's name as a file name: a Hugging Face id's `/` becomes `--`, anything else unsafe `--` too."""
    tag = re.sub(r"[^A-Za-z0-9._-]+", "--", name.strip("/").replace("/", "--"))
    return tag[-80:] or "model"


def result_suffix(protocol: str, split: str | None, version: str | None, limit: int | None,
                  label: str | None) -> str:
    """What a result's name carries besides its tag: `.paper` for the paper protocol, `.<split>`, `.<version>`,
    `.limit<K>` and `.<label>` when given."""
    return ("" if protocol == "official" else f".{protocol}") + (f".{split}" if split else "") \
        + (f".{version}" if version else "") + (f".limit{limit}" if limit else "") + (f".{label}" if label else "")


def result_paths(folder: Path, name: str) -> tuple[Path, Path]:
    """(result, samples) of the evaluation `name` (tag and suffix) in a benchmark's folder."""
    return folder / f"{name}.json", folder / f"{name}.samples.jsonl"


_EVAL_EXPECTED = ('expected {"bench", "model_tag", "epoch": int|null, "protocol", "headline": {"name", "value"}, '
                  '...} as written by `genenv evaluate`')


def read_eval_result(path: Path) -> dict[str, Any]:
    """One evaluation result, checked for the keys its readers use (`RunDir.read_evals`)."""
    where = str(path)
    try:
        data = json.loads(read_regular(path).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{where}: not valid JSON ({exc}); expected the result object `genenv evaluate` "
                         f"writes. Rerun the evaluation or remove the file.") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read the evaluation result ({exc.strerror or exc}).") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: {_EVAL_EXPECTED}; got {type(data).__name__}.")
    head = data.get("headline")
    if not isinstance(head, dict) or not isinstance(head.get("name"), str) or "value" not in head:
        raise InputError(f"{where}: `headline` missing or malformed; {_EVAL_EXPECTED}.")
    epoch = data.get("epoch")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise InputError(f"{where}: `epoch` must be an integer or null, got {json.dumps(epoch)[:40]}; "
                         f"{_EVAL_EXPECTED}.")
    for key in ("model_tag", "protocol"):
        if not isinstance(data.get(key), str):
            raise InputError(f"{where}: `{key}` must be a string; {_EVAL_EXPECTED}.")
    if not isinstance(data.get("config", {}), dict):
        raise InputError(f"{where}: `config` must be an object; {_EVAL_EXPECTED}.")
    return data


