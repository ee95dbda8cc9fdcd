"""`epochs/NNNN/metrics.json`: one epoch's curriculum and training numbers, gathered from its manifests.

It is derived state: `gather` computes it from the manifests alone. A stage commits it together with its
outputs and manifest (contract.py, "Commit order"), a no-op rerun rewrites it when it no longer matches, and
`status`, `report` and `compare` take the numbers from the manifests, not from the file, so a copy left stale
(by a hand edit, or a kill under an older genenv) never shows. Every key is present; a number is null until the
stage that produces it has run. `after_stage` is the commit's `metrics` row (catalogue/commit_subscribers.py).
Which manifest keys it gathers is read from the stage table on every call (`sources`), so a stage registered at
run time has its numbers in metrics.json too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_cli.catalogue.stages import STAGES
from genenv_cli.rundir import RunDir, json_bytes
from genenv_cli.rundir.schemas import METRICS_DOCS

if TYPE_CHECKING:
    from genenv_cli.catalogue.config import Config

# keys whose value is a mapping (by shape, by domain), not a number
MAPPINGS = {"env_shape_mix", "shape_success", "shape_success_by_source", "by_domain", "evals"}


def sources() -> dict[str, tuple[str, str, str]]:
    """key: (stage whose manifest has it, "counts" | "metrics", key there), as each stage's row in `STAGES`
    declares it now (the built-in rows and those registered in this process)."""
    return {key: (stage.name, part, name) for stage in STAGES.values() for key, (part, name) in stage.metrics.items()}


DOCS = METRICS_DOCS  # what each key means: with the other files' columns in pools, which docs/pools.md is made from

# by_domain merges two stages' manifests: generate-tasks' counts, then score's metrics
BY_DOMAIN = (("generate-tasks", "counts"), ("score", "metrics"))


def gather(run: RunDir, epoch: int, band: tuple[float, float], alpha: float,
           override: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The epoch's numbers from its manifests (`override`: stage -> a manifest to use instead of the file, the
    one a stage is about to commit)."""
    manifests: dict[str, Any] = {**run.manifests(epoch), **(override or {})}
    recorded = manifests.get("score", {}).get("config", {}) if isinstance(manifests.get("score"), dict) else {}
    recorded = recorded.get("curriculum") if isinstance(recorded, dict) else None
    if isinstance(recorded, dict):  # the α and band score's numbers were computed with
        alpha = recorded.get("alpha", alpha)
        band = (recorded.get("band_low", band[0]), recorded.get("band_high", band[1]))
    out: dict[str, Any] = {"epoch": epoch, "alpha": alpha, "band_low": band[0], "band_high": band[1]}
    for key, (stage, part, name) in sources().items():
        section = manifests.get(stage, {})
        section = section.get(part, {}) if isinstance(section, dict) else {}  # a manifest of the wrong shape
        out[key] = section.get(name) if isinstance(section, dict) else None
    out["by_domain"] = _by_domain(manifests)
    return out


def _by_domain(manifests: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """A mixed run's per-domain numbers, from the stages that have run; None for a single-domain run."""
    merged: dict[str, dict[str, Any]] = {}
    for stage, part in BY_DOMAIN:
        section = manifests.get(stage, {})
        section = section.get(part, {}) if isinstance(section, dict) else {}
        found = section.get("by_domain") if isinstance(section, dict) else None
        if isinstance(found, dict):
            for name, numbers in found.items():
                if isinstance(numbers, dict):
                    merged.setdefault(name, {}).update(numbers)
    return merged or None


def current(run: RunDir, cfg: Config, epoch: int) -> dict[str, Any]:
    """The epoch's numbers as the manifests have them now, under the run's current α and band."""
    c = cfg.curriculum
    return gather(run, epoch, (c.band_low, c.band_high), c.alpha)


def after_stage(run: RunDir, cfg: Config, epoch: int, stage: str, manifest: dict[str, Any] | None) -> dict[Path, bytes]:
    """The files derived from the epoch's manifests: metrics.json as the manifests make it, with `manifest` (about
    to be committed) in place of `stage`'s own. The contract commits it with every epoch stage's outputs."""
    c = cfg.curriculum
    data = gather(run, epoch, (c.band_low, c.band_high), c.alpha,
                  override={stage: manifest} if manifest is not None else None)
    return {run.metrics_path(epoch): json_bytes(data)}
