"""Reading a run's numbers for the report (and `genenv compare`): each epoch's metrics, its task statistics, and
the evaluation results, each checked for what the report uses (a malformed file is an InputError naming it)."""

from __future__ import annotations

import json
import math
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.metrics import MAPPINGS, sources

_BOOL_KEYS = {"env_kl_stopped"}


def number_keys() -> list[str]:
    """metrics.json's numeric keys, as the stage table has them now (a stage registered at run time included)."""
    return ["alpha", "band_low", "band_high", *[k for k in sources() if k not in _BOOL_KEYS | MAPPINGS]]


def _number(value: Any, where: str, key: str) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: `{key}` must be a number or null, got {json.dumps(value)[:80]}. It was changed "
                         f"by hand; rerun the epoch's stage that writes it with --force.")
    return None if isinstance(value, float) and not math.isfinite(value) else value


def read_metrics(run: RunDir, epoch: int, cfg: Any = None) -> dict[str, Any] | None:
    """The epoch's numbers with every key present (missing keys and NaN read as null); None when there are none
    yet. Where the epoch has manifests they are taken from them (`metrics.gather`, under `cfg`'s α and band,
    the run's own config when not given), never from a metrics.json that may be stale: that file is derived
    state. Only an epoch without manifests (its numbers kept alone, as archived results are) is read from its
    metrics.json."""
    from genenv_cli.rundir.metrics import current

    if any(run.manifest_path(epoch, stage).is_file() for stage, _, _ in sources().values()):
        data = current(run, cfg if cfg is not None else run.load_config(), epoch)
        path = run.manifests_dir(epoch)
    else:
        path = run.metrics_path(epoch)
        data = run.read_metrics_file(epoch)
        if data is None:
            return None
    out: dict[str, Any] = {"epoch": epoch}
    for key in number_keys():
        out[key] = _number(data.get(key), str(path), key)
    stopped = data.get("env_kl_stopped")
    if stopped is not None and not isinstance(stopped, bool):
        raise InputError(f"{path}: `env_kl_stopped` must be true, false or null, got {json.dumps(stopped)[:80]}.")
    out["env_kl_stopped"] = stopped
    for key in MAPPINGS:
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise InputError(f"{path}: `{key}` must be an object keyed by shape or domain, or null, got "
                             f"{json.dumps(value)[:80]}.")
        out[key] = value
    return out


def read_task_stats(run: RunDir, epoch: int) -> dict[str, list[Any]] | None:
    """p_task, in_band, source and attempts of every task of the epoch, and both estimates of p where score kept
    them (curriculum.p_estimator = "teacher_forced"; null otherwise); None when score has not run."""
    path = run.file("task_stats", epoch)
    if not path.exists():
        return None
    from genenv_cli.rundir.datafiles import read_parquet

    df = read_parquet(path, "task_stats", columns=["p_task", "in_band", "source", "attempts", "p_task_rollouts",
                                                   "p_task_teacher_forced"])
    return {c: df[c].to_list() for c in df.columns}


def read_evals(run: RunDir) -> list[dict[str, Any]]:
    """Every `evals/<bench>/<model-tag>.json` (`RunDir.read_evals` checks the keys the report uses), as rows."""
    found = []
    for path, data in run.read_evals():
        head, n = data["headline"], data.get("n")
        found.append({
            "bench": data.get("bench") if isinstance(data.get("bench"), str) else path.parent.name,
            "model_tag": data["model_tag"], "epoch": data.get("epoch"), "protocol": data["protocol"],
            "metric": head["name"], "value": _number(head["value"], str(path), "headline.value"),
            "n": n if isinstance(n, int) and not isinstance(n, bool) else None,
            "split": data.get("split"), "version": data.get("version"), "created": data.get("created"),
            "file": run.rel(path), "charted": True,
        })
    return found
