"""A stage reads only inputs that are committed and whole: each input an epoch stage wrote must still be what that
stage's manifest records, checked before the stage's body runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.rundir.fingerprints import unchanged
from genenv_cli.rundir.layout import RunDir


def require_committed_inputs(run: RunDir, stage: str, epoch: int, inputs: dict[str, Path]) -> None:
    """Before a stage runs its body: every input that a stage of the run wrote is still exactly what that stage's
    manifest records (its fingerprint), else an InputError naming the file and the stage to rerun. A stage reads
    only inputs that are committed and whole: a pool or a checkpoint edited by hand (NaN rewards), truncated, or
    left by a write that never committed is refused before anything is trained on it; a Parquet file that no
    longer reads is named as such. Not checked here: a JSONL task file, which its readers check line by line with
    each task's domain once it differs from what its manifest records (a task edited by hand is allowed, and its
    damage is named by line); and inputs no manifest records (the run's config, imported seeds, an upstream
    manifest), which are the staleness check's."""
    writers = _input_writers(run, epoch, inputs)
    for name, p in inputs.items():
        found = writers.get(run.rel(p))
        if not found or p.suffix == ".jsonl":
            continue
        if p.is_symlink() or not any(unchanged(p, fp) for _, _, fp in found):
            wrote_epoch, writer, _ = found[0]
            rerun = f"Rerun `genenv {writer} --epoch {wrote_epoch} --force`"
            if p.suffix == ".parquet" and p.is_file():
                _require_readable_parquet(p, rerun)
            raise InputError(f"{run.rel(p)}: `{stage} --epoch {epoch}` reads it as its input {name}, but "
                             f"it is not what `{writer} --epoch {wrote_epoch}` wrote (its manifest's fingerprint differs: "
                             f"changed since, or a write that never committed); nothing was trained or written. "
                             f"{rerun}, or put the file back as it was.")


def _require_readable_parquet(path: Path, rerun: str) -> None:
    """An InputError when a Parquet file's footer does not read (empty, truncated, not Parquet): said as such."""
    import polars as pl

    try:
        pl.read_parquet_schema(path)
    except Exception as exc:  # noqa: BLE001 - polars raises several error types for a damaged file
        raise InputError(f"{path}: not a readable Parquet file ({str(exc)[:160]}); it is empty, truncated or "
                         f"damaged. {rerun} to write it again.") from None


Writers = dict[str, list[tuple[int, str, dict[str, Any]]]]


def _input_writers(run: RunDir, epoch: int, inputs: dict[str, Path]) -> Writers:
    """{path: [(epoch, stage, fingerprint)]} of the inputs that epoch stages' manifests record as their
    output: the stage's own epoch, then the earlier ones while an input is still unaccounted for (a window of
    earlier pools)."""
    wanted = {run.rel(p) for p in inputs.values()}
    found: Writers = {}
    for e in [epoch] + [e for e in reversed(run.epochs()) if e < epoch]:
        if not wanted - set(found):
            break
        for writer, manifest in run.manifests(e).items():
            try:
                for rec in manifest.get("outputs", {}).values():
                    if rec["path"] in wanted and isinstance(rec["fingerprint"], dict):
                        found.setdefault(rec["path"], []).append((e, writer, rec["fingerprint"]))
            except (KeyError, AttributeError, TypeError):  # a manifest of another shape records nothing usable
                continue
    return found
