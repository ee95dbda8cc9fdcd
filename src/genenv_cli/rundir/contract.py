"""The stage contract (docs/design.md): declared inputs and outputs, one commit of outputs and manifest.

A stage builds a `StagePlan` (what it reads, what it writes, which config sections matter, which models it
uses) and hands `execute` a body that writes each output to the temporary path `Staging.path(name)` gives it.

Commit order. A stage's outputs, its manifest and the files derived from the manifests (the epoch's
metrics.json, `derived_files`) become visible together, or not at all:

1. prepare (nothing visible changes): the body writes every output to `.NAME.tmp-ID` (ID: the writer's pid);
   the new manifest, fingerprinting those files, is written and flushed to `manifests/.STAGE.json.tmp-ID`
   (the *intent*), and each derived file to its own `.NAME.tmp-ID`;
2. swap: each existing output (and derived file) is renamed aside to `.NAME.old-ID`, its new version renamed
   in;
3. commit point: the intent is renamed over `manifests/STAGE.json`;
4. the `.NAME.old-ID` copies are deleted.

A failure in 1 removes the temporary files; a failure in 2 or 3 puts every old copy back and removes what was
renamed in (`rundir.swap_in`), so any failed write (a full disk at the manifest, at a second output's rename,
at metrics.json) leaves the previous outputs, manifest and metrics exactly as they were. A kill is resolved by
the next run of the stage before it looks at anything (`rundir.recover_commit`): while the intent of a dead
writer exists and the committed manifest is still the one it records it supersedes, the commit point was not
reached and its swap is undone; an intent that a later commit superseded is discarded, never undone; without
one the commit happened, and the old copies are deleted. So the outputs always agree with the manifest beside
them. A writer is dead when no process with its PID runs, or one does that started at another time (the PID
was reused: `process_identity.py`).

Nothing is written through a symbolic link: a link at a lock, an output, a manifest or any folder of the
run between its root and them is refused with its name; temporary files are created afresh (O_EXCL,
O_NOFOLLOW). A recorded output is only read where the stage writes it, and only when it is a regular file
or a folder (never a device or a pipe).

Besides:
- rerunning with unchanged inputs, values and config is a no-op that says so (it still rewrites metrics.json
  when that no longer matches the manifests: it is derived state); `force=True` redoes it;
- a manifest whose inputs changed since it was written marks the stage stale; one whose outputs no
  longer match it marks the stage incomplete. `genenv status` reports both.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.errors import DiskError, GenenvError, InputError, disk_full
from genenv_cli.core.safefiles import link_refusal, read_regular, refuse_links_below, remove_entry
from genenv_cli.core.ui import open_log
from genenv_cli.core.version import __version__
from genenv_cli.rundir import (
    EpochLock,
    RunDir,
    commit,
    commit_hooks,
    fingerprint,
    read_pruned,
    recover_commit,
    shard_of,
    tmp_name,
    unchanged,
    write_bytes_atomic,
    write_new,
)
from genenv_cli.rundir.committed import require_committed_inputs
from genenv_cli.rundir.ranks import rank0_decides, require_launch_store
from genenv_cli.rundir.staleness import Change, config_changes, value_changes


def derived_files(run: RunDir, cfg: Config, plan: StagePlan, manifest: dict[str, Any] | None) -> dict[Path, bytes]:
    """The files derived from the epoch's manifests (the `derived` rows of `catalogue/commit_subscribers.py`: metrics.json), with
    `manifest` (None: the manifests as they are) in place of the stage's own: committed with every epoch stage's
    outputs."""
    out: dict[Path, bytes] = {}
    for derive in commit_hooks.subscribers("derived"):
        out.update(derive(run, cfg, plan.epoch, plan.stage, manifest))
    return out


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
    changes: list[Change] = field(default_factory=list)  # why it is stale, key by key (staleness.py)


@dataclass
class StageResult:
    stage: str
    epoch: int
    skipped: bool
    manifest: dict[str, Any]
    message: str


class Staging:
    """Temporary output paths for one stage run; `execute` commits them with the manifest."""

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
            tmp = tmp_name(final)
            if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
                remove_entry(tmp)  # a dead writer's leftover with this pid, or a link put there: never written through
            elif tmp.is_symlink():  # ranks share this name and may be writing into it already: only refuse a link
                raise link_refusal(tmp, f"a temporary output of `{self.plan.stage}`")
            self._tmp[name] = tmp
        return self._tmp[name]

    def discard(self) -> None:
        for tmp in self._tmp.values():
            with contextlib.suppress(OSError):
                remove_entry(tmp)

    def written(self) -> dict[str, tuple[Path, Path]]:
        """{name: (temporary, final)} of the outputs the body wrote; an error for a required one it did not."""
        out = {}
        for name, final in self.plan.outputs.items():
            tmp = self._tmp.get(name)
            if tmp is None or not os.path.lexists(tmp):
                if name in self.plan.optional_outputs:
                    continue
                raise RuntimeError(f"{self.plan.stage} did not write its output {name!r}")
            out[name] = (tmp, final)
        return out


def _check_kinds(run: RunDir, stage: str, written: dict[str, tuple[Path, Path]]) -> None:
    """A folder where a file output goes, or the reverse: named by the output's own name, before anything moves."""
    for name, (tmp, final) in written.items():
        if os.path.lexists(final) and not final.is_symlink() and final.is_dir() != tmp.is_dir():
            want, found = ("folder", "file") if tmp.is_dir() else ("file", "folder")
            raise InputError(f"{final} is a {found} where `{stage}` writes its output {name} (a {want}). Move it "
                             f"aside and rerun; nothing was changed.")


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
    values = value_changes(manifest.get("values", {}), _jsonable(plan.values))
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


def _report_crashed(run: RunDir, info: dict[str, Any]) -> None:
    """The lock's record was left by a holder that never released it cleanly: say so, and where its log is."""
    stage = str(info.get("stage", "?"))
    log = run.logs_dir() / f"{stage.split('.')[0]}.log"
    text = (f"warning: the previous `{stage}` (pid {info.get('pid')} on {info.get('host')}, started "
            f"{info.get('since')}) did not finish: it crashed or was killed. Its outputs were never put in place; "
            f"its log is {log}. Carrying on.")
    print(text, file=sys.stderr, flush=True)
    with contextlib.suppress(OSError), open_log(log, run.root) as fh:
        fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} WARNING: {text[len('warning: '):]}\n")


def _config_entry(cfg: Config, name: str) -> Any:
    if "." in name:
        section, key = name.split(".", 1)
        return getattr(getattr(cfg, section), key)
    return cfg.section(name)


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(values, sort_keys=True, default=str))


def _recorded_outputs(run: RunDir, epoch: int) -> dict[str, dict[str, Any]]:
    """Fingerprints the epoch's manifests recorded for their outputs, by path (an upstream stage's outputs are
    this stage's inputs: no need to hash a gigabyte of rollouts twice)."""
    found: dict[str, dict[str, Any]] = {}
    for manifest in run.manifests(epoch).values():
        try:
            for rec in manifest.get("outputs", {}).values():
                found[rec["path"]] = rec["fingerprint"]
        except (KeyError, AttributeError, TypeError):  # a manifest of another shape records nothing usable
            continue
    return found


def _fingerprint_reusing(path: Path, recorded: dict[str, Any] | None) -> dict[str, Any]:
    """The recorded fingerprint when the file's size and mtime still match it, else a fresh one."""
    if recorded and not recorded.get("dir") and path.is_file():
        st = path.stat()
        if st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns"):
            return recorded
    return fingerprint(path)


# who writes epochs/N/<role>/: the checkpoints epoch N+1 starts from
CHECKPOINT_STAGES = {"agent": "update-agent", "env": "update-env"}


def pruned_fingerprint(record: dict[str, Any], rel: str) -> Any:
    """The fingerprint pruned.json (`record`) holds for the output at `rel`, None when it holds none."""
    entry = record.get(rel)
    return entry.get("fingerprint") if isinstance(entry, dict) else None


def checkpoint_usable(run: RunDir, folder: Path) -> bool:
    """Whether a checkpoint folder of the run can be loaded: it is there and, when `run.keep_checkpoints` pruned
    it, still whole (a deletion cut short by a kill leaves part of it, which must never be loaded)."""
    if not folder.is_dir():
        return False
    where = _checkpoint_of(run, folder)
    pruned = _pruned_now(run, *where) if where else None
    return pruned is None or unchanged(folder, pruned)


def _pruned_now(run: RunDir, epoch: int, role: str) -> dict[str, Any] | None:
    """The fingerprint pruned.json records for the epoch's checkpoint, when it is the checkpoint the stage's
    manifest records now (a record of an earlier checkpoint, since written again with --force, is no longer
    about this one); None otherwise."""
    rel = run.rel(run.checkpoint_dir(epoch, role))
    recorded = pruned_fingerprint(read_pruned(run, epoch), rel)
    if not isinstance(recorded, dict):
        return None
    current = run.recorded_output(epoch, CHECKPOINT_STAGES[role], role)
    return recorded if current is not None and current["fingerprint"] == recorded else None


def _checkpoint_of(run: RunDir, folder: Path) -> tuple[int, str] | None:
    """(epoch, role) of a checkpoint folder of the run (`epochs/0003/agent`), None for any other path."""
    parent = folder.parent
    if parent.parent == run.root / "epochs" and parent.name.isdigit() and folder.name in CHECKPOINT_STAGES:
        return int(parent.name), folder.name
    return None


def checkpoint_gone(run: RunDir, cfg: Config, folder: Path, needed_by: str) -> InputError:
    """The error for a checkpoint of the run that `needed_by` must load and cannot: pruned by
    `run.keep_checkpoints` (the setting named, and how to get it back), or gone by a kill or a hand."""
    epoch, role = _checkpoint_of(run, folder) or (0, folder.name)
    stage = CHECKPOINT_STAGES.get(role, "update-agent")
    rel = run.rel(folder)
    base = " Or evaluate the base model explicitly with `--epoch 0`." if needed_by.startswith("evaluate") else ""
    if role in CHECKPOINT_STAGES and _pruned_now(run, epoch, role) is not None:
        n, m = cfg.run.keep_checkpoints, cfg.run.keep_checkpoints_every
        return InputError(
            f"{rel}: epoch {epoch}'s {role} checkpoint was pruned by run.keep_checkpoints (= {n}"
            f"{f', with run.keep_checkpoints_every = {m}' if m else ''}) once epoch {epoch + 1} was done; "
            f"{run.rel(run.epoch_dir(epoch) / 'pruned.json')} records it. `{needed_by}` needs it. Recreate it with "
            f"`genenv {stage} --epoch {epoch} --force` (it trains again on the same data; the stages of epoch "
            f"{epoch + 1} become stale and `genenv run` redoes them), and to keep checkpoints from now on, raise "
            f"run.keep_checkpoints or run.keep_checkpoints_every in genenv.toml (0 keeps every checkpoint).{base}")
    return InputError(f"{rel}: epoch {epoch}'s {role} checkpoint folder is missing, though `{stage}` of epoch "
                      f"{epoch} completed ({run.rel(run.manifest_path(epoch, stage))} is there), and `{needed_by}` "
                      f"needs it; a kill or a hand removed it. Recreate it with `genenv {stage} --epoch {epoch} "
                      f"--force`.{base}")


def require_models(run: RunDir, cfg: Config, plan: StagePlan) -> None:
    """Before a stage runs its body: every checkpoint of the run it loads (`plan.models`) can be loaded, else an
    InputError naming it (`checkpoint_gone`), before any model is read. Not at plan time: a done stage whose
    upstream checkpoint was pruned stays done (`status` builds plans too)."""
    for name, _tag in plan.models.values():
        folder = Path(name)
        if _checkpoint_of(run, folder) is not None and not checkpoint_usable(run, folder):
            raise checkpoint_gone(run, cfg, folder, f"{plan.stage} --epoch {plan.epoch}")


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


def execute(run: RunDir, cfg: Config, stage: str, epoch: int, build_plan: Callable[[], StagePlan],
            body: Callable[[Staging], None], *, force: bool = False) -> StageResult:
    """Run one stage under the contract. `build_plan` is called under the epoch's lock, so a second writer
    fails on the lock before it looks at any input. The files computed from the epoch's manifests
    (metrics.json, `derived_files`) are committed with the outputs, and rewritten by a no-op run when they no
    longer match. What subscribed to the commit (`catalogue/commit_subscribers.py`) is called before any work and, once the stage is
    committed or found up to date, after it (the trackers: checked installed, then sent the points they lack)."""
    for before in commit_hooks.subscribers("before"):
        before(cfg, f"`{stage} --epoch {epoch}`")
    # under a launcher rank 0 decides, after its recovery, and the other ranks follow (rundir/ranks.py)
    store = require_launch_store(cfg.run.dist_timeout, stage, epoch)   # refused without one for several processes
    rank = process_rank()
    if rank != 0:  # other ranks of a distributed update: no lock, nothing written but by rank 0
        decided = None
        if store is not None:
            decided = rank0_decides(rank, f"{stage}/{epoch}", None, store=store, timeout=cfg.run.dist_timeout)
            if decided["action"] == "error":
                raise GenenvError(f"`{stage} --epoch {epoch}`: rank 0 stopped it before any work: "
                                  f"{decided['message']}")
            if decided["action"] == "done":
                return StageResult(stage, epoch, True, {}, decided["message"])
        return _execute(run, cfg, build_plan(), body, force=force, is_main=False, derived=False,
                        decided=decided is not None)

    said: list[str] = []

    def announce(action: str, message: str = "") -> None:
        said.append(action)
        if store is not None:
            rank0_decides(0, f"{stage}/{epoch}", {"action": action, "message": message}, store=store,
                          timeout=cfg.run.dist_timeout)

    shared = shard_of(stage) is not None
    try:
        with EpochLock(run.epoch_dir(epoch), stage, root=run.root, shared=shared) as lock:
            if lock.crashed:
                _report_crashed(run, lock.crashed)
            # rollout shards run side by side and add no numbers: they leave the derived files to the other stages
            result = _execute(run, cfg, build_plan(), body, force=force, is_main=True, derived=not shared,
                              announce=announce)
            if not shared:
                for after in commit_hooks.subscribers("after"):
                    after(run, cfg)
    except BaseException as exc:
        if not said:  # an error after the decision is the body's: every rank is in it
            announce("error", str(exc) or type(exc).__name__)
        raise
    return result


def _execute(run: RunDir, cfg: Config, plan: StagePlan, body: Callable[[Staging], None], *, force: bool,
             is_main: bool, derived: bool, announce: Callable[..., None] | None = None,
             decided: bool = False) -> StageResult:
    """`announce(action, message)`: rank 0's decision (done, or run) told to the other ranks once it is taken;
    `decided`: another rank's, told that rank 0 decided to run (its own checks are skipped)."""
    manifest_path = run.manifest_path(plan.epoch, plan.stage)
    if not decided:
        if is_main:
            # a killed writer's half-done commit, even when this run turns out to have nothing to do
            recover_stage(run, cfg, plan, derived)
        for up_epoch, up_stage in plan.requires:
            require_done(run, up_epoch, up_stage, plan.stage)
        for name, p in plan.inputs.items():
            if not p.exists():
                raise InputError(f"`{plan.stage} --epoch {plan.epoch}`: input {name} ({p}) does not exist.")
        state = check_state(run, cfg, plan)
        if state.state == "done" and not force:
            if is_main and derived:
                _refresh_derived(run, cfg, plan)
            finished = state.manifest.get("finished", "?") if state.manifest else "?"
            message = (f"{plan.stage} epoch {plan.epoch}: up to date (completed {finished}, inputs unchanged); "
                       f"nothing to do. Use --force to redo it.")
            _say(announce, "done", message)
            return StageResult(plan.stage, plan.epoch, True, state.manifest or {}, message)
        require_models(run, cfg, plan)
        require_committed_inputs(run, plan.stage, plan.epoch, plan.inputs)
        _say(announce, "run")
    known = _recorded_outputs(run, plan.epoch)
    inputs_fp = {name: {"path": run.rel(p), "fingerprint": _fingerprint_reusing(p, known.get(run.rel(p)))}
                 for name, p in plan.inputs.items()}
    started = time.time()
    staging = Staging(plan, is_main=is_main)
    extra: list[Path] = []
    try:
        body(staging)
        if not is_main:
            manifest = _manifest(run, cfg, plan, staging, inputs_fp, started, time.time(), {})
            return StageResult(plan.stage, plan.epoch, False, manifest, f"{plan.stage} epoch {plan.epoch}: done")
        written = staging.written()
        _check_kinds(run, plan.stage, written)
        finished = time.time()
        manifest = _manifest(run, cfg, plan, staging, inputs_fp, started, finished,
                             {name: fingerprint(tmp) for name, (tmp, _) in written.items()})
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        pairs = [pair for pair in written.values()]
        for path, content in (derived_files(run, cfg, plan, manifest) if derived else {}).items():
            tmp = tmp_name(path)
            extra.append(tmp)
            write_new(tmp, content)
            pairs.append((tmp, path))
        commit(pairs, manifest_path, manifest)
    except BaseException as exc:
        staging.discard()
        for p in extra:
            with contextlib.suppress(OSError):
                remove_entry(p)
        if disk_full(exc):
            where = sorted({str(p.parent) for p in plan.outputs.values()}) or [str(run.epoch_dir(plan.epoch))]
            raise DiskError(f"no space left on device at {', '.join(where)} while `{plan.stage} --epoch "
                            f"{plan.epoch}` wrote its outputs. Nothing was changed: the previous outputs, manifest "
                            f"and metrics are as they were and the partial ones were removed. Free some space (or "
                            f"move the run to a bigger disk) and rerun the command.") from exc
        raise
    return StageResult(plan.stage, plan.epoch, False, manifest, f"{plan.stage} epoch {plan.epoch}: done")


def _say(announce: Callable[..., None] | None, action: str, message: str = "") -> None:
    if announce is not None:
        announce(action, message)


def recover_stage(run: RunDir, cfg: Config, plan: StagePlan, derived: bool = True) -> list[str]:
    """What a stage run does first, under the lock: refuse links at its outputs, manifest and derived files (and
    at the folders between the run's root and them), then resolve a killed writer's half-done commit
    (`rundir.recover_commit`: undone when it never reached its commit point, finished when it did) and remove
    its temporary files."""
    manifest_path = run.manifest_path(plan.epoch, plan.stage)
    problem = manifests_problem(run, plan.epoch)
    if problem:
        raise InputError(problem + ".")
    finals = {run.rel(p): p for p in plan.outputs.values()}
    if derived:
        finals.update({run.rel(p): p for p in derived_files(run, cfg, plan, None)})
    for p in [*finals.values(), manifest_path]:
        refuse_links_below(run.root, p, f"an output of `{plan.stage}`")
    return recover_commit(finals, manifest_path, run.root)


def _manifest(run: RunDir, cfg: Config, plan: StagePlan, staging: Staging, inputs_fp: dict[str, Any],
              started: float, finished: float, outputs_fp: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
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
        # fingerprints of the temporary files: a rename keeps content, size and modification time
        "outputs": {name: {"path": run.rel(plan.outputs[name]), "fingerprint": fp} for name, fp in outputs_fp.items()},
        "counts": staging.counts,
        "metrics": staging.metrics,
        # `commit` adds what recovery orders commits by: the manifest this one supersedes, and its writer
    }


def _refresh_derived(run: RunDir, cfg: Config, plan: StagePlan) -> None:
    """A no-op run rewrites a derived file that no longer matches the manifests (a kill between an older
    genenv's manifest and its metrics.json, a hand edit). Best effort: on read-only storage it stays as it is."""
    for path, content in derived_files(run, cfg, plan, None).items():
        try:
            same = read_regular(path, follow=False) == content
        except (OSError, InputError):
            same = False
        if not same:
            with contextlib.suppress(OSError):
                write_bytes_atomic(path, content)
