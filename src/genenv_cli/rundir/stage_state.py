"""A stage's plan (what it reads, writes, and which config and models matter), and its state: the plan compared
with the manifest its last run committed (done, stale, incomplete or missing), key by key. `genenv status`, the
pruning and every stage run ask it; the commit itself is contract.py's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.errors import InputError
from genenv_cli.rundir.checkpoint_records import pruned_fingerprint, read_pruned
from genenv_cli.rundir.fingerprints import unchanged
from genenv_cli.rundir.layout import RunDir
from genenv_cli.rundir.staleness import Change, config_changes, value_changes


@dataclass
class StagePlan:
    stage: str
    epoch: int
    inputs: dict[str, Path] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)
    optional_outputs: set[str] = field(default_factory=set)
    config_sections: list[str] = field(default_factory=list)
    requires: list[tuple[int, str]] = field(default_factory=list)
    # role ("agent" | "env") -> (name to load, tag for records): resolved once, when the plan is built
    models: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class StageState:
    state: str  # done | stale | incomplete | missing
    reasons: list[str]
    manifest: dict[str, Any] | None
    changes: list[Change] = field(default_factory=list)  # why it is stale, key by key (staleness.py)


@dataclass
class StageResult:
    stage: str
    epoch: int
    skipped: bool
    manifest: dict[str, Any]
    message: str


def manifests_problem(run: RunDir, epoch: int) -> str | None:
    """Why the epoch's manifests cannot be where they belong (a file or a link at `manifests`), or None."""
    d = run.manifests_dir(epoch)
    if d.is_symlink():
        return (f"{d} is a symbolic link where the epoch's manifests folder belongs; genenv does not follow links "
                f"inside a run. Remove the link and rerun the epoch's stages")
    if d.exists() and not d.is_dir():
        return (f"{d} is a file where the epoch's manifests folder belongs, so no stage of epoch {epoch} counts "
                f"as done. Move the file aside (the stages' records were in that folder) and rerun the epoch's "
                f"stages")
    return None


def check_state(run: RunDir, cfg: Config, plan: StagePlan) -> StageState:
    """Compare the stage's manifest with its current inputs, values, config and outputs."""
    path = run.manifest_path(plan.epoch, plan.stage)
    problem = manifests_problem(run, plan.epoch)
    if problem:
        return StageState("incomplete", [problem], None)
    if not os.path.lexists(path):
        return StageState("missing", ["no manifest"], None)
    try:
        manifest = run.read_manifest(plan.epoch, plan.stage)
    except InputError as exc:
        why = str(exc).split(";")[0] if path.is_symlink() or not path.is_file() else "not a JSON object"
        return StageState("incomplete", [f"{run.rel(path)} is not a valid manifest ({why})"], None)
    try:
        return _compare(run, cfg, plan, manifest)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:  # a manifest edited into another shape
        detail = f": {str(exc)[:120]}" if isinstance(exc, ValueError) else ""
        return StageState("incomplete", [f"{run.rel(path)} is not a valid manifest (wrong shape{detail})"], None)


def _compare(run: RunDir, cfg: Config, plan: StagePlan, manifest: dict[str, Any]) -> StageState:
    reasons: list[str] = []
    changes: list[Change] = []
    recorded = manifest.get("inputs", {})
    for name, p in plan.inputs.items():
        rec = recorded.get(name)
        if rec is None:
            reasons.append(f"new input {name}")
            changes.append(Change("input", name))
        elif not unchanged(p, rec["fingerprint"]):
            reasons.append(f"input {name} changed ({run.rel(p)})")
            changes.append(Change("input", name))
    for name in recorded:
        if name not in plan.inputs:
            reasons.append(f"input {name} no longer read")
            changes.append(Change("input", name))
    values = value_changes(manifest.get("values", {}), jsonable(plan.values))
    if values:
        reasons.append("changed: " + ", ".join(c.short() for c in values))
        changes += values
    if manifest.get("config_digest") != cfg.digest(plan.config_sections):
        keys = config_changes(manifest.get("config"), cfg, plan.config_sections)
        reasons.append("config changed: " + ", ".join(c.short() for c in keys) if keys
                       else "config changed in " + ", ".join(plan.config_sections))
        changes += keys or [Change("sections", ", ".join(plan.config_sections))]
    if reasons:
        return StageState("stale", reasons, manifest, changes)
    pruned = read_pruned(run, plan.epoch)
    expected = {name: run.rel(p) for name, p in plan.outputs.items()}
    for name, rec in manifest.get("outputs", {}).items():
        if expected.get(name) != rec["path"]:  # never read a path a manifest names elsewhere (/dev/zero, ../x)
            raise ValueError(f"output {name} recorded at {rec['path']!r}")
        p = plan.outputs[name]
        if not p.is_symlink() and pruned_fingerprint(pruned, rec["path"]) == rec["fingerprint"]:
            # deleted by run.keep_checkpoints once the next epoch was done (pruning.py); a deletion that was cut
            # short leaves part of the folder, which counts as deleted too: the record came first
            continue
        if p.is_symlink() or not unchanged(p, rec["fingerprint"]):
            reasons.append(f"output {rec['path']} missing or modified")
    if reasons:
        return StageState("incomplete", reasons, manifest)
    return StageState("done", [], manifest)


def jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(values, sort_keys=True, default=str))


def require_done(run: RunDir, epoch: int, stage: str, needed_by: str) -> dict[str, Any]:
    """The manifest of an upstream stage, or a clear error telling what to run."""
    path = run.manifest_path(epoch, stage)
    problem = manifests_problem(run, epoch)
    if problem:
        raise InputError(f"{problem}; `{needed_by} --epoch {epoch}` needs `{stage}` of epoch {epoch}, whose "
                         f"manifest is {path}.")
    if not os.path.lexists(path):
        raise InputError(f"`{needed_by} --epoch {epoch}` needs `{stage}` of epoch {epoch} to have completed, "
                         f"but {run.rel(path)} does not exist. Run `genenv {stage} --epoch {epoch}` first.")
    manifest = run.read_manifest(epoch, stage, f"manifest of `{stage}`")
    if manifest.get("stage") != stage or not isinstance(manifest.get("outputs"), dict):
        raise InputError(f"{path}: not a manifest of `{stage}` (no `stage: {stage}` or no `outputs` mapping), so "
                         f"`{needed_by} --epoch {epoch}` cannot trust its outputs. Rerun `genenv {stage} --epoch "
                         f"{epoch} --force`.")
    return manifest
