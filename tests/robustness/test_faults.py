"""Fault injection: kill each stage at every one of its file-system operations, not at random moments.

A first run of the stage counts the operations it performs inside the run directory (opening a file for
writing, mkdir, rename/replace, unlink, rmdir, rmtree). Then, for every N from 1 to that count, a fresh copy of
the finished run reruns the stage with the N-th operation raising `KillPoint`; from that moment every further
operation in the run directory raises too, so no cleanup runs, as after SIGKILL. After each kill:

- every file that belongs to another stage is byte for byte as it was;
- no output of the stage is lost: each exists, or is put back by the recovery the next run performs first;
- after that recovery the outputs and the manifest agree (commit order: they become visible together or not at
  all): the stage is `done`, with the previous manifest and exactly the previous outputs and metrics.json, or
  with the new manifest;
- a rerun completes, and the stage is then `done`.

A second harness makes the N-th operation fail once with "no space left on device" (the process goes on): the
command must fail with that error and leave every file exactly as it was, or (a failure after its commit point,
while deleting the old copies) succeed.

`evaluate` commits its result the same way (the result is its samples' manifest) and is checked the same way:
after the recovery the next evaluation runs first, the result is the previous one or the new one, and agrees
with the samples file beside it.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.stages import stage_module
from genenv_cli.cli import app
from genenv_cli.core.errors import GenenvError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import check_state, recover_stage
from paths import FIXTURES

# every test here reruns whole stages once per file-system operation: the slow tier
pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # minutes on 2 cores: `nox -s heavy`
runner = CliRunner()
FIX = FIXTURES
STAGES = ["generate-tasks", "rollout", "score", "update-agent", "update-env"]


class KillPoint(BaseException):
    """Raised at the chosen operation: a BaseException, so nothing in the stage mistakes it for an error."""


class Injector:
    """Counts (and, armed, kills at) file-system operations on paths under `root`. With `enospc=True` the armed
    operation fails once with ENOSPC instead, and the process goes on (its own error handling runs). With
    `dir_fd=True` operations relative to an open folder count too: the unlink and rmdir calls inside a recursive
    delete (shutil.rmtree), so a kill can land between its deletes."""

    def __init__(self, root: Path, kill_at: int | None = None, enospc: bool = False, dir_fd: bool = False):
        self.root = os.path.realpath(root) + os.sep
        self.kill_at = kill_at
        self.enospc = enospc
        self.dir_fd = dir_fd
        self.count = 0
        self.dead = False
        self.log: list[str] = []

    def _at(self, path, fd) -> str | None:
        """The path of `path` relative to the open folder `fd`, for counting (None: not a path)."""
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{fd}"), os.fsdecode(path))
        except (OSError, TypeError):
            return None

    def _inside(self, path) -> bool:
        try:
            p = os.fspath(path)
        except TypeError:
            return False
        if isinstance(p, bytes):
            p = p.decode(errors="replace")
        return os.path.isabs(p) and os.path.realpath(p).startswith(self.root)

    def hit(self, what: str, path) -> None:
        if not self._inside(path):
            return
        if self.dead:
            raise KillPoint(f"already dead: {what} {path}")
        self.count += 1
        self.log.append(f"{what} {path}")
        if self.enospc and self.count == self.kill_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        if self.kill_at is not None and self.count >= self.kill_at and not self.enospc:
            self.dead = True
            raise KillPoint(f"killed at operation {self.count}: {what} {path}")

    def install(self, mp: pytest.MonkeyPatch) -> None:
        real_open = builtins.open

        def open_(file, mode="r", *a, **k):
            if isinstance(file, str | bytes | os.PathLike) and any(c in mode for c in "wax+"):
                self.hit(f"open({mode})", file)
            return real_open(file, mode, *a, **k)

        def wrap(name, fn):
            def inner(path, *a, **k):
                if not k.get("dir_fd") and not k.get("src_dir_fd"):
                    self.hit(name, path)
                elif self.dir_fd and k.get("dir_fd") is not None:
                    self.hit(name, self._at(path, k["dir_fd"]))
                return fn(path, *a, **k)
            return inner

        mp.setattr(builtins, "open", open_)
        mp.setattr(io, "open", open_)
        for name in ("replace", "rename", "unlink", "remove", "rmdir", "mkdir"):
            mp.setattr(os, name, wrap(f"os.{name}", getattr(os, name)))
        real_os_open = os.open

        def os_open(path, flags, *a, **k):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                if not k.get("dir_fd"):
                    self.hit("os.open(w)", path)
                elif self.dir_fd:
                    self.hit("os.open(w)", self._at(path, k["dir_fd"]))
            return real_os_open(path, flags, *a, **k)

        mp.setattr(os, "open", os_open)
        mp.setattr(shutil, "rmtree", wrap("shutil.rmtree", shutil.rmtree))


DEAD_PID = 999_999_999


def _die(root: Path) -> None:
    """The killed writer's process is gone: its leftovers (`.NAME.tmp-PID`, `.NAME.old-PID`, named with this test's
    own pid) now carry a pid that no process has, as they would after a real kill; and the locks it held are
    released, as the kernel releases a dead process's (a kill can land inside a lock's own clean-up)."""
    import fcntl

    prefix = os.path.realpath(root) + os.sep
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(prefix):
                fcntl.flock(int(fd), fcntl.LOCK_UN)
        except OSError:
            continue
    suffix = f"-{os.getpid()}"
    for p in sorted(root.rglob(f"*{suffix}"), key=lambda q: -len(q.parts)):
        if p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name):
            os.rename(p, p.with_name(p.name[: -len(suffix)] + f"-{DEAD_PID}"))


def _files(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "logs" not in p.relative_to(root).parts and not p.name.startswith(".lock"):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _outputs(run: RunDir, stage: str, epoch: int) -> dict[str, Path]:
    cfg = run.load_config()
    return stage_module(stage).plan(run, cfg, epoch).outputs


def _owned(rel: str, outputs: dict[str, Path], run: RunDir, stage: str, epoch: int) -> bool:
    """Files the stage may change: its outputs (and anything inside an output folder), its manifest, metrics.json,
    and temporary or old copies beside them."""
    p = run.root / rel
    if p == run.manifest_path(epoch, stage) or p == run.epoch_dir(epoch) / "metrics.json":
        return True
    if any(part.startswith(".") and (".tmp-" in part or ".old-" in part) for part in Path(rel).parts):
        return True
    return any(p == o or o in p.parents for o in outputs.values())


def _leftover(rel: str) -> bool:
    return any(part.startswith(".") and (".tmp-" in part or ".old-" in part) for part in Path(rel).parts)


def _run_stage(root: Path, stage: str, epoch: int, force: bool) -> None:
    run = RunDir(root)
    stage_module(stage).run(run, run.load_config(), epoch, force=force)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model) -> Path:
    root = tmp_path_factory.mktemp("faults") / "run"
    sets = ["generate.tasks_per_epoch=4", "generate.variations=2", "generate.seed_share=0.5",
            "generate.max_new_tokens=16", "generate.max_rounds=1", "rollout.group_size=2", "rollout.max_new_tokens=8",
            "env_update.kl_max=100", "curriculum.k_min=1.0", "agent_update.batch_size=8", "env_update.batch_size=8",
            "run.eval_every=0"]
    r = runner.invoke(app, ["init", str(root), "--domain", "arith", "--agent-model", str(tiny_model),
                            "--env-model", str(tiny_model), *[a for s in sets for a in ("--set", s)]])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["run", "--epochs", "1", "--run", str(root), "-q"])
    assert r.exit_code == 0, r.output + str(r.exception)
    return root


@pytest.mark.parametrize("stage", STAGES)
def test_a_kill_at_every_operation_loses_nothing_and_a_rerun_completes(finished, tmp_path, monkeypatch, stage):
    epoch = 1
    count = tmp_path / "count"
    shutil.copytree(finished, count)
    inj = Injector(count)
    with monkeypatch.context() as mp:
        inj.install(mp)
        _run_stage(count, stage, epoch, force=True)
    total = inj.count
    assert total >= 3, inj.log
    before = _files(finished)
    base_manifest = RunDir(finished).manifest_path(epoch, stage).read_bytes()
    for n in range(1, total + 1):
        root = tmp_path / f"kill-{n}"
        shutil.copytree(finished, root)
        inj = Injector(root, kill_at=n)
        with monkeypatch.context() as mp:
            inj.install(mp)
            with pytest.raises(KillPoint):
                _run_stage(root, stage, epoch, force=True)
        _die(root)
        run = RunDir(root)
        outputs = _outputs(run, stage, epoch)
        after = _files(root)
        where = f"{stage}, killed at {inj.log[-1]} ({n} of {total})"
        for rel, digest in before.items():
            if not _owned(rel, outputs, run, stage, epoch):
                assert after.get(rel) == digest, f"{where}: {rel} changed"
        plan = stage_module(stage).plan(run, run.load_config(), epoch)
        recover_stage(run, run.load_config(), plan)  # what the next run does first
        for name, p in outputs.items():
            assert p.exists(), f"{where}: output {name} lost"
        state = check_state(run, run.load_config(), plan)
        assert state.state == "done", f"{where}: after recovery the outputs and the manifest disagree: {state}"
        if run.manifest_path(epoch, stage).read_bytes() == base_manifest:
            now = _files(root)
            for rel, digest in before.items():
                if _owned(rel, outputs, run, stage, epoch) and not _leftover(rel):
                    assert now.get(rel) == digest, f"{where}: the previous manifest, but {rel} is not as it was"
        _run_stage(root, stage, epoch, force=False)
        state = check_state(run, run.load_config(), stage_module(stage).plan(run, run.load_config(), epoch))
        assert state.state == "done", f"{where}: after the rerun {state}"
        assert not [p for p in run.epoch_dir(epoch).iterdir() if ".tmp-" in p.name or ".old-" in p.name], where
        shutil.rmtree(root)


def test_evaluate_result_and_samples_agree_at_every_kill(finished, tmp_path, monkeypatch):
    from genenv_cli.actions import evaluate as ev

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": str(i), "output": f"<answer>{i}</answer>"}) + "\n" for i in range(6)))

    def evaluate(root: Path, predictions: Path) -> None:
        run = RunDir(root)
        ev.evaluate(run, run.load_config(), "bamboogle", data=FIX / "bamboogle" / "bamboogle.csv",
                    predictions=predictions)

    base = tmp_path / "base"
    shutil.copytree(finished, base)
    evaluate(base, preds)  # a previous result, to be replaced by one over other predictions
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"id": str(i), "output": "nobody"}) + "\n" for i in range(6)))
    result_name = "evals/bamboogle/pred-other.json"

    def rerun_root(name: str) -> Path:
        """A copy of the run where a result of that name exists already: the evaluation replaces it."""
        root = tmp_path / name
        shutil.copytree(base, root)
        shutil.copy(root / "evals/bamboogle/pred-preds.json", root / result_name)
        shutil.copy(root / "evals/bamboogle/pred-preds.samples.jsonl",
                    root / result_name.replace(".json", ".samples.jsonl"))
        return root

    count = rerun_root("count")  # counted as the kills run: replacing a result, not writing the first one
    inj = Injector(count)
    with monkeypatch.context() as mp:
        inj.install(mp)
        evaluate(count, other)
    total = inj.count
    assert total >= 3, inj.log
    kept = set()
    for n in range(1, total + 1):
        root = rerun_root(f"kill-{n}")
        inj = Injector(root, kill_at=n)
        with monkeypatch.context() as mp:
            inj.install(mp)
            with pytest.raises(KillPoint):
                evaluate(root, other)
        _die(root)
        result = root / result_name
        samples = root / result_name.replace(".json", ".samples.jsonl")
        ev.recover_results(result.parent)  # what the next evaluation in the folder does first
        where = f"killed at {inj.log[-1]}"
        assert result.exists(), where  # the previous result or the new one, never none
        rec = json.loads(result.read_text())
        assert hashlib.sha256(samples.read_bytes()).hexdigest() == rec["samples"]["sha256"], where
        previous = (root / "evals/bamboogle/pred-preds.json").read_bytes()
        assert result.read_bytes() == previous or rec["model"]["predictions"] == str(other), where
        kept.add(result.read_bytes() == previous)
        assert not [p.name for p in result.parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name], where
        evaluate(root, other)
        rec = json.loads(result.read_text())
        assert rec["counts"]["correct"] == 0
        assert hashlib.sha256(samples.read_bytes()).hexdigest() == rec["samples"]["sha256"]
        shutil.rmtree(root)
    assert kept == {True, False}, "the kills landed both before and after the commit point"


@pytest.mark.parametrize("stage", ["score", "update-agent"])
def test_a_full_disk_at_any_write_leaves_every_file_as_it_was(finished, tmp_path, monkeypatch, stage):
    """ENOSPC at the N-th operation, for every N: the command fails naming the full disk and the previous outputs,
    manifest and metrics.json are byte for byte as they were (or the failure came after the commit point, and
    the stage is done with its new outputs). No temporary file is left behind."""
    epoch = 1
    count = tmp_path / "count"
    shutil.copytree(finished, count)
    inj = Injector(count)
    with monkeypatch.context() as mp:
        inj.install(mp)
        _run_stage(count, stage, epoch, force=True)
    total = inj.count
    before = _files(finished)
    failed = 0
    for n in range(1, total + 1):
        root = tmp_path / f"enospc-{n}"
        shutil.copytree(finished, root)
        inj = Injector(root, kill_at=n, enospc=True)
        with monkeypatch.context() as mp:
            inj.install(mp)
            try:
                _run_stage(root, stage, epoch, force=True)
                ok = True
            except (GenenvError, OSError) as exc:
                ok = False
                assert "no space left" in str(exc).lower(), f"{stage}, ENOSPC at {inj.log[n - 1]}: {exc}"
        where = f"{stage}, ENOSPC at {inj.log[n - 1]} ({n} of {total})"
        run = RunDir(root)
        if ok:
            plan = stage_module(stage).plan(run, run.load_config(), epoch)
            assert check_state(run, run.load_config(), plan).state == "done", where
        else:
            failed += 1
            assert _files(root) == before, f"{where}: a failed command changed files"
        left = [str(p) for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]
        assert ok or not left, f"{where}: left {left}"
        shutil.rmtree(root)
    assert failed >= total // 2, "the harness failed to fail the command"


def test_a_kill_between_prunings_deletes_loses_nothing_and_the_next_run_finishes_it(two_full_epochs, tmp_path,
                                                                                     monkeypatch):
    """Pruning killed at every one of its operations, the unlinks and rmdirs inside its recursive delete included:
    afterwards every stage still counts as done (a half-deleted checkpoint that pruned.json records is pruned, never
    incomplete), and resuming the run retrains nothing and leaves what an uninterrupted pruning leaves."""
    from genenv_cli.actions.runner import run_epochs
    from genenv_cli.core.ui import UI
    from genenv_cli.machinery.pruning import prune
    from stagekit import set_keep_checkpoints

    base = tmp_path / "base"
    shutil.copytree(two_full_epochs, base)
    set_keep_checkpoints(base, 1)
    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    inj = Injector(clean, dir_fd=True)
    with monkeypatch.context() as mp:
        inj.install(mp)
        assert prune(RunDir(clean), RunDir(clean).load_config()) == ["epochs/0001/agent", "epochs/0001/env"]
    total = inj.count
    deletes = [line for line in inj.log if "unlink" in line or "rmdir" in line]
    assert len(deletes) >= 10, inj.log   # the files of two checkpoints, one by one
    expected = {k: v for k, v in _files(clean).items() if not k.endswith("pruned.json")}
    manifests = {str(p.relative_to(base)): p.read_bytes() for p in base.glob("epochs/*/manifests/*.json")}
    for n in range(1, total + 1):
        root = tmp_path / f"kill-{n}"
        shutil.copytree(base, root)
        run = RunDir(root)
        inj = Injector(root, kill_at=n, dir_fd=True)
        with monkeypatch.context() as mp:
            inj.install(mp)
            with pytest.raises(KillPoint):
                prune(run, run.load_config())
        _die(root)
        where = f"pruning killed at {inj.log[-1]} ({n} of {total})"
        cfg = run.load_config()
        for e in (1, 2):
            for stage in STAGES:
                state = check_state(run, cfg, stage_module(stage).plan(run, cfg, e))
                assert state.state == "done", f"{where}: epoch {e} {stage} {state}"
        run_epochs(run, cfg, 2, ui=UI(quiet=True))
        assert {str(p.relative_to(root)): p.read_bytes() for p in root.glob("epochs/*/manifests/*.json")} == \
            manifests, f"{where}: resuming redid a stage"
        now = {k: v for k, v in _files(root).items() if not k.endswith("pruned.json")}
        assert now == expected, f"{where}: {sorted(set(now) ^ set(expected))}"
        shutil.rmtree(root)
