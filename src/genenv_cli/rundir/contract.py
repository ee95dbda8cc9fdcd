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
import os
import sys
import time
from collections.abc import Callable
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
    log_name,
    recover_commit,
    shard_of,
    tmp_name,
    write_bytes_atomic,
    write_new,
)
from genenv_cli.rundir.checkpoint_records import require_models
from genenv_cli.rundir.committed import require_committed_inputs
from genenv_cli.rundir.ranks import Alone, coordination
from genenv_cli.rundir.stage_state import (
    StagePlan,
    StageResult,
    StageState,
    check_state,
    jsonable,
    manifests_problem,
    require_done,
)

__all__ = ["StagePlan", "StageResult", "StageState", "Staging", "check_state", "derived_files", "execute",
           "manifests_problem", "recover_stage", "require_done"]


def derived_files(run: RunDir, cfg: Config, plan: StagePlan, manifest: dict[str, Any] | None) -> dict[Path, bytes]:
    """The files derived from the epoch's manifests (the `derived` rows of `catalogue/commit_subscribers.py`: metrics.json), with
    `manifest` (None: the manifests as they are) in place of the stage's own: committed with every epoch stage's
    outputs."""
    out: dict[Path, bytes] = {}
    for derive in commit_hooks.subscribers("derived"):
        out.update(derive(run, cfg, plan.epoch, plan.stage, manifest))
    return out


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


def _report_crashed(run: RunDir, info: dict[str, Any]) -> None:
    """The lock's record was left by a holder that never released it cleanly: say so, and where its log is."""
    stage = str(info.get("stage", "?"))
    log = run.logs_dir() / f"{log_name(stage)}.log"
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


def execute(run: RunDir, cfg: Config, stage: str, epoch: int, build_plan: Callable[[], StagePlan],
            body: Callable[[Staging], None], *, force: bool = False) -> StageResult:
    """Run one stage under the contract. `build_plan` is called under the epoch's lock, so a second writer
    fails on the lock before it looks at any input. The files computed from the epoch's manifests
    (metrics.json, `derived_files`) are committed with the outputs, and rewritten by a no-op run when they no
    longer match. What subscribed to the commit (`catalogue/commit_subscribers.py`) is called before any work and,
    once the stage is committed or found up to date, after it (the trackers: checked installed, then sent the points
    they lack). Under a launcher rank 0 decides, after its recovery, and the other ranks follow (`ranks.coordination`)."""
    for before in commit_hooks.subscribers("before"):
        before(cfg, f"`{stage} --epoch {epoch}`")
    ranks = coordination(cfg.run.dist_timeout, stage, epoch)   # refused without a store for several processes
    if not ranks.is_main:  # other ranks of a distributed update: no lock, nothing written but by rank 0
        return _follow(run, cfg, stage, epoch, build_plan, body, force, ranks)
    shared = shard_of(stage) is not None
    try:
        with EpochLock(run.epoch_dir(epoch), stage, root=run.root, shared=shared) as lock:
            if lock.crashed:
                _report_crashed(run, lock.crashed)
            # rollout shards run side by side and add no numbers: they leave the derived files to the other stages
            plan = build_plan()
            done = _up_to_date(run, cfg, plan, force=force, recover=True, derived=not shared)
            ranks.tell("done", done.message) if done else ranks.tell("run")
            result = done or _run_and_commit(run, cfg, plan, body, is_main=True, derived=not shared)
            if not shared:
                for after in commit_hooks.subscribers("after"):
                    after(run, cfg)
    except BaseException as exc:
        if not ranks.told:  # an error after the decision is the body's: every rank is in it
            ranks.tell("error", str(exc) or type(exc).__name__)
        raise
    return result


def _follow(run: RunDir, cfg: Config, stage: str, epoch: int, build_plan: Callable[[], StagePlan],
            body: Callable[[Staging], None], force: bool, ranks: Alone) -> StageResult:
    """A rank other than 0: rank 0's decision followed (its own checks only when it has none to hear), the body run,
    nothing written."""
    decided = ranks.hear()
    if decided is not None and decided["action"] == "error":
        raise GenenvError(f"`{stage} --epoch {epoch}`: rank 0 stopped it before any work: {decided['message']}")
    if decided is not None and decided["action"] == "done":
        return StageResult(stage, epoch, True, {}, decided["message"])
    plan = build_plan()
    done = None if decided is not None else _up_to_date(run, cfg, plan, force=force, recover=False, derived=False)
    return done or _run_and_commit(run, cfg, plan, body, is_main=False, derived=False)


def _up_to_date(run: RunDir, cfg: Config, plan: StagePlan, *, force: bool, recover: bool,
                derived: bool) -> StageResult | None:
    """The checks before the body: a killed writer's half-done commit resolved (`recover`: the process that
    locks), the upstream stages and inputs there; the stage's result when it is up to date (derived files
    refreshed), else None once its models and inputs are checked loadable and committed."""
    if recover:  # a killed writer's half-done commit, even when this run turns out to have nothing to do
        recover_stage(run, cfg, plan, derived)
    for up_epoch, up_stage in plan.requires:
        require_done(run, up_epoch, up_stage, plan.stage)
    for name, p in plan.inputs.items():
        if not p.exists():
            raise InputError(f"`{plan.stage} --epoch {plan.epoch}`: input {name} ({p}) does not exist.")
    state = check_state(run, cfg, plan)
    if state.state == "done" and not force:
        if derived:
            _refresh_derived(run, cfg, plan)
        finished = state.manifest.get("finished", "?") if state.manifest else "?"
        message = (f"{plan.stage} epoch {plan.epoch}: up to date (completed {finished}, inputs unchanged); "
                   f"nothing to do. Use --force to redo it.")
        return StageResult(plan.stage, plan.epoch, True, state.manifest or {}, message)
    require_models(run, cfg, list(plan.models.values()), f"{plan.stage} --epoch {plan.epoch}")
    require_committed_inputs(run, plan.stage, plan.epoch, plan.inputs)
    return None


def _run_and_commit(run: RunDir, cfg: Config, plan: StagePlan, body: Callable[[Staging], None], *, is_main: bool,
                    derived: bool) -> StageResult:
    """The body writes its outputs to temporary paths; the main process commits them with the manifest and the
    derived files (`derived`) in one swap (module docstring), or removes them all on any failure."""
    manifest_path = run.manifest_path(plan.epoch, plan.stage)
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
        manifest = _manifest(run, cfg, plan, staging, inputs_fp, started, time.time(),
                             {name: fingerprint(tmp) for name, (tmp, _) in written.items()})
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        pairs = list(written.values())
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
            raise _no_space(run, plan) from exc
        raise
    return StageResult(plan.stage, plan.epoch, False, manifest, f"{plan.stage} epoch {plan.epoch}: done")


def _no_space(run: RunDir, plan: StagePlan) -> DiskError:
    where = sorted({str(p.parent) for p in plan.outputs.values()}) or [str(run.epoch_dir(plan.epoch))]
    return DiskError(f"no space left on device at {', '.join(where)} while `{plan.stage} --epoch {plan.epoch}` "
                     f"wrote its outputs. Nothing was changed: the previous outputs, manifest and metrics are as "
                     f"they were and the partial ones were removed. Free some space (or move the run to a bigger "
                     f"disk) and rerun the command.")


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
        "values": jsonable(plan.values),
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
