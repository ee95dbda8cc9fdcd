"""The stage contract (docs/design.md): declared inputs and outputs, atomic outputs, manifest last.

A stage builds a `StagePlan` (what it reads, what it writes, which config sections matter, which models it
uses) and hands `execute` a body that writes each output to the temporary path `Staging.path(name)` gives it.
Only after the body returns are the outputs renamed into place, and only then is the manifest written (then
the caller's `after_commit` hook runs: the stages rewrite the epoch's metrics.json there), so:

- a crash or SIGKILL at any point leaves the previous outputs as they were (at worst a `.tmp-PID` file,
  removed by the next run);
- rerunning with unchanged inputs, values and config is a no-op that says so; `force=True` redoes it;
- a manifest whose inputs changed since it was written marks the stage stale; one whose outputs no
  longer match it marks the stage incomplete. `genenv status` reports both.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli import __version__
from genenv_cli.config import Config
from genenv_cli.errors import DiskError, InputError, disk_full
from genenv_cli.rundir import (
    EpochLock,
    RunDir,
    clean_stale_tmp,
    fingerprint,
    read_json,
    recover_interrupted,
    replace_into_place,
    shard_of,
    tmp_name,
    unchanged,
    write_json_atomic,
)


def process_rank() -> int:
    """Rank under torchrun/accelerate (RANK), 0 when run alone. Only rank 0 locks and writes."""
    return int(os.environ.get("RANK", "0"))


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


@dataclass
class StageResult:
    stage: str
    epoch: int
    skipped: bool
    manifest: dict[str, Any]
    message: str


class Staging:
    """Temporary output paths for one stage run; commit renames them into place."""

    def __init__(self, plan: StagePlan, is_main: bool = True):
        self.plan = plan
        self.is_main = is_main
        self.counts: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {}
        self._tmp: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        if name not in self.plan.outputs:
            raise KeyError(f"{self.plan.stage} declares no output {name!r}")
        if name not in self._tmp:
            final = self.plan.outputs[name]
            final.parent.mkdir(parents=True, exist_ok=True)
            self._tmp[name] = tmp_name(final)
        return self._tmp[name]

    def discard(self) -> None:
        import shutil

        for tmp in self._tmp.values():
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            elif tmp.exists():
                tmp.unlink()

    def commit(self) -> None:
        for name in self.plan.outputs:
            tmp = self._tmp.get(name)
            if tmp is None or not tmp.exists():
                if name in self.plan.optional_outputs:
                    continue
                raise RuntimeError(f"{self.plan.stage} did not write its output {name!r}")
        for name, final in self.plan.outputs.items():
            tmp = self._tmp.get(name)
            if tmp is not None and tmp.exists():
                replace_into_place(tmp, final)


def check_state(run: RunDir, cfg: Config, plan: StagePlan) -> StageState:
    """Compare the stage's manifest with its current inputs, values, config and outputs."""
    path = run.manifest_path(plan.epoch, plan.stage)
    if not path.exists():
        return StageState("missing", ["no manifest"], None)
    try:
        manifest = read_json(path, "stage manifest")
    except InputError:
        return StageState("incomplete", [f"{run.rel(path)} is not a valid manifest (not a JSON object)"], None)
    try:
        return _compare(run, cfg, plan, manifest)
    except (TypeError, AttributeError, KeyError, ValueError):  # a manifest edited into another shape
        return StageState("incomplete", [f"{run.rel(path)} is not a valid manifest (wrong shape)"], None)


def _compare(run: RunDir, cfg: Config, plan: StagePlan, manifest: dict[str, Any]) -> StageState:
    reasons: list[str] = []
    recorded = manifest.get("inputs", {})
    for name, p in plan.inputs.items():
        rec = recorded.get(name)
        if rec is None:
            reasons.append(f"new input {name}")
        elif not unchanged(p, rec["fingerprint"]):
            reasons.append(f"input {name} changed ({run.rel(p)})")
    for name in recorded:
        if name not in plan.inputs:
            reasons.append(f"input {name} no longer read")
    if manifest.get("values", {}) != _jsonable(plan.values):
        changed = [k for k in set(plan.values) | set(manifest.get("values", {}))
                   if _jsonable(plan.values).get(k) != manifest.get("values", {}).get(k)]
        reasons.append("changed: " + ", ".join(sorted(changed)))
    if manifest.get("config_digest") != cfg.digest(plan.config_sections):
        reasons.append("config changed in " + ", ".join(plan.config_sections))
    if reasons:
        return StageState("stale", reasons, manifest)
    pruned = _pruned(run, plan.epoch)
    for rec in manifest.get("outputs", {}).values():
        p = run.root / rec["path"]
        if not p.exists() and pruned.get(rec["path"], {}).get("fingerprint") == rec["fingerprint"]:
            continue  # deleted by run.keep_checkpoints once the next epoch was complete (pruning.py)
        if not unchanged(p, rec["fingerprint"]):
            reasons.append(f"output {rec['path']} missing or modified")
    if reasons:
        return StageState("incomplete", reasons, manifest)
    return StageState("done", [], manifest)


def _pruned(run: RunDir, epoch: int) -> dict[str, Any]:
    """epochs/N/pruned.json: the outputs run.keep_checkpoints deleted, by path (read here, not through pruning.py,
    which imports this module's callers)."""
    import json

    try:
        data = json.loads((run.epoch_dir(epoch) / "pruned.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _report_crashed(run: RunDir, info: dict[str, Any]) -> None:
    """The lock's record was left by a holder that never released it cleanly: say so, and where its log is."""
    import sys

    stage = str(info.get("stage", "?"))
    log = run.logs_dir() / f"{stage.split('.')[0]}.log"
    text = (f"warning: the previous `{stage}` (pid {info.get('pid')} on {info.get('host')}, started "
            f"{info.get('since')}) did not finish: it crashed or was killed. Its outputs were never put in place; "
            f"its log is {log}. Carrying on.")
    print(text, file=sys.stderr, flush=True)
    with contextlib.suppress(OSError), open(log, "a", encoding="utf-8") as fh:
        fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} WARNING: {text[len('warning: '):]}\n")


def _config_entry(cfg: Config, name: str) -> Any:
    if "." in name:
        section, key = name.split(".", 1)
        return getattr(getattr(cfg, section), key)
    return cfg.section(name)


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(values, sort_keys=True, default=str))


def _recorded_outputs(run: RunDir, epoch: int) -> dict[str, dict[str, Any]]:
    """Fingerprints the epoch's manifests recorded for their outputs, by path (an upstream stage's outputs are
    this stage's inputs: no need to hash a gigabyte of rollouts twice)."""
    import json

    found: dict[str, dict[str, Any]] = {}
    mdir = run.manifests_dir(epoch)
    for m in mdir.glob("*.json") if mdir.is_dir() else []:
        try:
            for rec in json.loads(m.read_text()).get("outputs", {}).values():
                found[rec["path"]] = rec["fingerprint"]
        except (OSError, ValueError, KeyError, AttributeError, TypeError, RecursionError):
            continue
    return found


def _fingerprint_reusing(path: Path, recorded: dict[str, Any] | None) -> dict[str, Any]:
    """The recorded fingerprint when the file's size and mtime still match it, else a fresh one."""
    if recorded and not recorded.get("dir") and path.is_file():
        st = path.stat()
        if st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns"):
            return recorded
    return fingerprint(path)


def require_done(run: RunDir, epoch: int, stage: str, needed_by: str) -> dict[str, Any]:
    """The manifest of an upstream stage, or a clear error telling what to run."""
    path = run.manifest_path(epoch, stage)
    if not path.exists():
        raise InputError(f"`{needed_by} --epoch {epoch}` needs `{stage}` of epoch {epoch} to have completed, "
                         f"but {run.rel(path)} does not exist. Run `genenv {stage} --epoch {epoch}` first.")
    manifest = read_json(path, f"manifest of `{stage}`")
    if manifest.get("stage") != stage or not isinstance(manifest.get("outputs"), dict):
        raise InputError(f"{path}: not a manifest of `{stage}` (no `stage: {stage}` or no `outputs` mapping), so "
                         f"`{needed_by} --epoch {epoch}` cannot trust its outputs. Rerun `genenv {stage} --epoch "
                         f"{epoch} --force`.")
    return manifest


def execute(run: RunDir, cfg: Config, stage: str, epoch: int, build_plan: Callable[[], StagePlan],
            body: Callable[[Staging], None], *, force: bool = False,
            after_commit: Callable[[RunDir, Config, StagePlan], None] | None = None) -> StageResult:
    """Run one stage under the contract. `build_plan` is called under the epoch's lock, so a second writer
    fails on the lock before it looks at any input. `after_commit` runs (on the main rank) once the outputs
    and the manifest are in place, still under the lock."""
    if process_rank() != 0:  # other ranks of a distributed update: no lock, nothing written but by rank 0
        return _execute(run, cfg, build_plan(), body, force=force, is_main=False, after_commit=None)
    with EpochLock(run, epoch, stage, shared=shard_of(stage) is not None) as lock:
        if lock.crashed:
            _report_crashed(run, lock.crashed)
        return _execute(run, cfg, build_plan(), body, force=force, is_main=True, after_commit=after_commit)


def _execute(run: RunDir, cfg: Config, plan: StagePlan, body: Callable[[Staging], None], *, force: bool,
             is_main: bool, after_commit: Callable[[RunDir, Config, StagePlan], None] | None) -> StageResult:
    if is_main:
        for d in {p.parent for p in plan.outputs.values()}:
            # a killed writer's leftovers, even when this run turns out to have nothing to do: a folder output
            # killed between its two renames gets its old copy back, temporary files of dead pids go
            recover_interrupted(d)
            clean_stale_tmp(d)
    for up_epoch, up_stage in plan.requires:
        require_done(run, up_epoch, up_stage, plan.stage)
    for name, p in plan.inputs.items():
        if not p.exists():
            raise InputError(f"`{plan.stage} --epoch {plan.epoch}`: input {name} ({p}) does not exist.")
    state = check_state(run, cfg, plan)
    if state.state == "done" and not force:
        finished = state.manifest.get("finished", "?") if state.manifest else "?"
        return StageResult(plan.stage, plan.epoch, True, state.manifest or {},
                           f"{plan.stage} epoch {plan.epoch}: up to date (completed {finished}, inputs "
                           f"unchanged); nothing to do. Use --force to redo it.")
    known = _recorded_outputs(run, plan.epoch)
    inputs_fp = {name: {"path": run.rel(p), "fingerprint": _fingerprint_reusing(p, known.get(run.rel(p)))}
                 for name, p in plan.inputs.items()}
    started = time.time()
    staging = Staging(plan, is_main=is_main)
    try:
        body(staging)
        if is_main:
            staging.commit()
    except BaseException as exc:
        staging.discard()
        if disk_full(exc):
            where = sorted({str(p.parent) for p in plan.outputs.values()}) or [str(run.epoch_dir(plan.epoch))]
            raise DiskError(f"no space left on device at {', '.join(where)} while `{plan.stage} --epoch "
                            f"{plan.epoch}` wrote its outputs. Nothing was changed: the previous outputs are as "
                            f"they were and the partial ones were removed. Free some space (or move the run to a "
                            f"bigger disk) and rerun the command.") from exc
        raise
    finished = time.time()
    manifest = {
        "stage": plan.stage,
        "epoch": plan.epoch,
        "genenv_version": __version__,
        "host": os.uname().nodename,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(finished)),
        "seconds": round(finished - started, 3),
        "config_sections": plan.config_sections,
        "config_digest": cfg.digest(plan.config_sections),
        "config": {s: _config_entry(cfg, s) for s in plan.config_sections},
        "inputs": inputs_fp,
        "values": _jsonable(plan.values),
        "outputs": {name: {"path": run.rel(p), "fingerprint": fingerprint(p)}
                    for name, p in plan.outputs.items() if p.exists()} if is_main else {},
        "counts": staging.counts,
        "metrics": staging.metrics,
    }
    if is_main:
        write_json_atomic(run.manifest_path(plan.epoch, plan.stage), manifest)
        if after_commit is not None:
            after_commit(run, cfg, plan)
    return StageResult(plan.stage, plan.epoch, False, manifest, f"{plan.stage} epoch {plan.epoch}: done")
