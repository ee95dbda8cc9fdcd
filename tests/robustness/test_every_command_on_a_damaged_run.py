"""Every CLI command on a corpus of hostile run directories, the way an unknown probe would try them.

Each case damages a fresh copy of one finished tiny run (links out of the run, hard links to files outside it,
devices, files where folders belong, leftovers of killed writers, an intent a later commit superseded, stale
derived files, damaged records); then every command runs on it in turn. For each command:

- the exit status is 0, 2 (bad input, named) or 3 (a held lock), never 1, and no Python traceback is printed;
- a file outside the run that a link points to is never changed, and a dangling link's target never created;
- a command that fails changes no file of the run (logs and lock files aside);
- a command that succeeds changes only what a stage owns (its outputs, manifests, metrics.json) or what the case
  declares it may repair;
- what the case checks afterwards holds (the committed outputs of a superseded intent's stage are kept).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from hostile import BAMBOOGLE, E1, cli

# the commands, in the order they run on each damaged copy; RUN, OUT and PREDS are filled in per case
COMMANDS: list[list[str]] = [
    ["status"], ["status", "--json"],
    ["generate-tasks", "--epoch", "1"], ["rollout", "--epoch", "1"], ["score", "--epoch", "1"],
    ["update-agent", "--epoch", "1"], ["update-env", "--epoch", "1"],
    ["evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", "PREDS"], ["table"], ["init", "RUN"],
]
# the ones that redo work or draw charts (seconds each), and `run` (a process per stage): with the slow tests
SLOW_COMMANDS: list[list[str]] = [
    ["score", "--epoch", "1", "--force"], ["report", "--out", "OUT/report.html"],
    ["compare", "RUN", "--out", "OUT/compare.html"], ["run", "--epochs", "1"],
    ["export", "--epoch", "1", "--out", "OUT/export", "--force"],
]


def _hash(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    """Every regular file of the run (logs and lock files aside: every command appends to its log and empties
    the lock it held), by its path, with its content's hash; links are recorded by their target, never read."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if rel.split(os.sep)[0] == "logs" or name.startswith(".lock"):
                continue
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = _hash(p)
    return out


def _owned(rel: str) -> bool:
    """What a successful stage may rewrite: outputs of the epoch, pool partitions, manifests, metrics.json."""
    parts = Path(rel).parts
    return parts[0] in ("epochs", "pools", "report") or rel.startswith("evals/")


class Case:
    def __init__(self, name: str, damage: Callable[[Path, Path], None], may_change: tuple[str, ...] = (),
                 check: Callable[[Path, list[str]], None] | None = None):
        self.name, self.damage, self.may_change, self.check = name, damage, may_change, check


def _link_out(rel: str, dangling: bool = False) -> Callable[[Path, Path], None]:
    """Replace RUN/rel by a link to a copy outside the run (or to a path that does not exist)."""
    def damage(run: Path, outside: Path) -> None:
        p = run / rel
        target = outside / ("missing" if dangling else Path(rel).name)
        if not dangling:
            if p.is_dir():
                shutil.copytree(p, target)
            elif p.exists():
                shutil.copy(p, target)
            else:
                target.write_text("outside the run\n")
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif os.path.lexists(p):
            p.unlink()
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(target)
    return damage


def _write(rel: str, content: bytes | str) -> Callable[[Path, Path], None]:
    def damage(run: Path, outside: Path) -> None:
        p = run / rel
        if p.is_dir():
            shutil.rmtree(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return damage


def _folder_at(rel: str) -> Callable[[Path, Path], None]:
    def damage(run: Path, outside: Path) -> None:
        p = run / rel
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
        p.mkdir()
        (p / "mine.txt").write_text("a folder a user put here\n")
    return damage


def _fifo_at(rel: str) -> Callable[[Path, Path], None]:
    def damage(run: Path, outside: Path) -> None:
        p = run / rel
        p.unlink(missing_ok=True)
        os.mkfifo(p)
    return damage


def _edit_manifest(stage: str, edit: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    def damage(run: Path, outside: Path) -> None:
        p = run / E1 / "manifests" / f"{stage}.json"
        m = json.loads(p.read_text())
        edit(m)
        p.write_text(json.dumps(m))
    return damage


def _device_output(m: dict) -> None:
    m["outputs"]["scores"]["path"] = "/dev/zero"
    m["outputs"]["scores"]["fingerprint"].update({"size": 0, "mtime_ns": 1})


def _huge_shard(run: Path, outside: Path) -> None:
    m = run / E1 / "manifests"
    (m / "rollout.json").rename(m / "rollout.shard-1-of-99999999999999999999.json")


def _half_done_commit(run: Path, outside: Path) -> None:
    """update-agent killed between moving its checkpoint aside and renaming the new one in."""
    os.replace(run / E1 / "agent", run / E1 / ".agent.old-999999999")
    (run / E1 / "manifests" / ".update-agent.json.tmp-999999999").write_text("{")


def _stale_metrics(run: Path, outside: Path) -> None:
    p = run / E1 / "metrics.json"
    m = json.loads(p.read_text())
    m.update({"env_r_mean": 0.5, "tasks": 8})
    p.write_text(json.dumps(m))


def _dead_holder(run: Path, outside: Path) -> None:
    (run / E1 / ".lock").write_text(json.dumps({"stage": "score", "pid": 999999999, "host": "h", "since": "x"}))


def _hard_link_out(rel: str) -> Callable[[Path, Path], None]:
    """Make RUN/rel a second name of a file outside the run (its content is watched like every outside file)."""
    def damage(run: Path, outside: Path) -> None:
        p = run / rel
        target = outside / (Path(rel).name.lstrip(".") + ".outside")
        target.write_text("outside the run\n")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.unlink(missing_ok=True)
        os.link(target, p)
    return damage


def _hard_linked_from_outside(rel: str) -> Callable[[Path, Path], None]:
    """Give RUN/rel (as the run wrote it) a second name outside the run: rewriting the output must leave that one."""
    def damage(run: Path, outside: Path) -> None:
        os.link(run / rel, outside / Path(rel).name)
    return damage


def _leftovers_out_of_range(run: Path, outside: Path) -> None:
    """Names of killed writers whose PID suffix no kernel hands out (os.kill raised OverflowError on them)."""
    (run / E1 / ".scores.parquet.tmp-9999999999").write_text("junk")
    (run / E1 / "manifests" / ".score.json.tmp-2147483648").write_text("{")
    (run / E1 / ".rollouts.parquet.old-0").write_text("junk")


def _superseded_intent(run: Path, outside: Path) -> None:
    """A killed score's intent and the copies it moved aside, left while a later score committed (its PID was
    held by a live process then): undoing it would put the stale copies over the committed outputs."""
    import hashlib

    dead = 4_000_000
    manifest = run / E1 / "manifests" / "score.json"
    (outside / "score.json.committed").write_bytes(manifest.read_bytes())
    intent = json.loads(manifest.read_text())
    intent["supersedes"] = hashlib.sha256(b"an older score manifest").hexdigest()
    intent["writer"] = {"pid": dead, "start": 1, "boot": None, "host": os.uname().nodename}
    (manifest.parent / f".score.json.tmp-{dead}").write_text(json.dumps(intent))
    for name in ("scores.parquet", "task_stats.parquet"):
        (run / E1 / f".{name}.old-{dead}").write_text("the killed writer's stale copy")


def _committed_score_kept(run: Path, args: list[str]) -> None:
    """The later commit stays: its manifest is never undone (nor redone, but by --force)."""
    outside = run.parent / "outside"
    if "--force" in args:
        (outside / "forced").touch()   # a forced score commits anew: from here on its manifest is its own
    if not (outside / "forced").exists():
        committed = (outside / "score.json.committed").read_bytes()
        assert (run / E1 / "manifests" / "score.json").read_bytes() == committed, "the committed score was undone"
    assert (run / E1 / "scores.parquet").read_bytes()[:4] == b"PAR1", "the committed scores were replaced"


def _config_oversized(run: Path, outside: Path) -> None:
    (run / "genenv.toml").write_text("# " + "x" * (2 << 20) + "\n")


CASES = [
    Case("lock-link", _link_out("epochs/0001/.lock")),
    Case("lock-link-dangling", _link_out("epochs/0001/.lock", dangling=True)),
    Case("lock-fifo", _fifo_at("epochs/0001/.lock")),
    Case("output-link", _link_out("epochs/0001/scores.parquet")),
    Case("checkpoint-link", _link_out("epochs/0001/agent")),
    Case("manifests-link", _link_out("epochs/0001/manifests")),
    Case("metrics-link", _link_out("epochs/0001/metrics.json")),
    Case("pool-folder-link", _link_out("pools/agent_train")),
    Case("evals-link", _link_out("evals/bamboogle")),
    Case("log-link", _link_out("logs/score.log")),
    Case("epochs-link", _link_out("epochs")),
    Case("tasks-to-dev-zero", lambda run, out: (run / E1 / "tasks.jsonl").unlink()
         or (run / E1 / "tasks.jsonl").symlink_to("/dev/zero")),
    Case("manifest-output-at-dev-zero", _edit_manifest("score", _device_output)),
    Case("manifest-output-outside", _edit_manifest(
        "score", lambda m: m["outputs"]["scores"].update({"path": "../outside/x"}))),
    Case("manifests-a-file", _write("epochs/0001/manifests", "not a folder")),
    Case("folder-at-output", _folder_at("epochs/0001/scores.parquet")),
    Case("fifo-at-metrics", _fifo_at("epochs/0001/metrics.json"), may_change=("epochs/0001/metrics.json",)),
    Case("huge-shard-on-disk", _huge_shard),
    Case("manifest-tmp-of-a-dead-writer", _write("epochs/0001/manifests/.score.json.tmp-999999999", "{"),
         may_change=("epochs/0001/manifests/.score.json.tmp-999999999",)),
    Case("half-done-commit", _half_done_commit,
         may_change=("epochs/0001/.agent.old-999999999", "epochs/0001/manifests/.update-agent.json.tmp-999999999")),
    Case("stale-metrics", _stale_metrics, may_change=("epochs/0001/metrics.json",)),
    Case("dead-lock-holder", _dead_holder),
    Case("tasks-not-utf8", _write("epochs/0001/tasks.jsonl", b'{"task_id": "\xff\xfe"}\n')),
    Case("manifest-wrong-shape", _write("epochs/0001/manifests/score.json", "[1, 2]")),
    Case("metrics-wrong-shape", _write("epochs/0001/metrics.json", "[1, 2]")),
    Case("epoch-a-file", _write("epochs/0002", "a file where a folder belongs")),
    Case("empty-pool-partition", _write("pools/agent_train/epoch=0001.parquet", b"")),
    Case("config-a-folder", _folder_at("genenv.toml")),
    # the third round: linked folders and hard links at what genenv changes in place, PID suffixes out of range,
    # an intent a later commit superseded, a config past its bound (a FIFO or /dev/zero at genenv.toml is
    # test_special_files.py's, in a process of its own: a regression there would hang or fill memory)
    Case("logs-folder-link", _link_out("logs")),
    Case("lock-hard-link", _hard_link_out("epochs/0001/.lock")),
    Case("log-hard-link", _hard_link_out("logs/score.log")),
    Case("output-hard-linked-outside", _hard_linked_from_outside("epochs/0001/scores.parquet")),
    Case("metrics-hard-linked-outside", _hard_linked_from_outside("epochs/0001/metrics.json")),
    Case("leftovers-pid-out-of-range", _leftovers_out_of_range,
         may_change=("epochs/0001/.scores.parquet.tmp-9999999999", "epochs/0001/manifests/.score.json.tmp-2147483648",
                     "epochs/0001/.rollouts.parquet.old-0")),
    Case("superseded-intent", _superseded_intent,
         may_change=("epochs/0001/manifests/.score.json.tmp-4000000", "epochs/0001/.scores.parquet.old-4000000",
                     "epochs/0001/.task_stats.parquet.old-4000000"), check=_committed_score_kept),
    Case("config-oversized", _config_oversized),
]


def _corpus_case(finished: Path, tmp_path: Path, case: Case, commands: list[list[str]]) -> None:
    run, outside, out = tmp_path / "run", tmp_path / "outside", tmp_path / "out"
    shutil.copytree(finished, run, symlinks=True)
    outside.mkdir()
    out.mkdir()
    preds = tmp_path / "corpus-preds.jsonl"
    preds.write_text("".join(json.dumps({"id": str(i), "output": "<answer>x</answer>"}) + "\n" for i in range(6)))
    case.damage(run, outside)
    watched = {p: _hash(p) for p in outside.rglob("*") if p.is_file() and not p.is_symlink()}
    for args in commands:
        args = [str(run) if a == "RUN" else str(preds) if a == "PREDS" else a.replace("OUT", str(out)) for a in args]
        if args[0] not in ("compare", "init"):
            args += ["--run", str(run)]
        before = _tree(run)
        r = cli(*args, expect=None)
        where = f"{case.name}: genenv {' '.join(args[:3])}"
        assert r.exit_code in (0, 2, 3), f"{where}: exit {r.exit_code}\n{r.output}"
        assert {p: _hash(p) for p in watched} == watched, f"{where}: changed a file outside the run"
        assert not (outside / "missing").exists(), f"{where}: created a dangling link's target"
        after = _tree(run)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        allowed = [k for k in changed if any(k == m or k.startswith(m + os.sep) for m in case.may_change)]
        if r.exit_code != 0:
            assert not [k for k in changed if before.get(k) is not None and k not in allowed], (
                f"{where}: failed (exit {r.exit_code}) but changed {changed}\n{r.output}")
        else:
            assert not [k for k in changed if before.get(k) is not None and not _owned(k) and k not in allowed], (
                f"{where}: changed {changed}")
        if case.check is not None:
            case.check(run, args)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_command_on_a_hostile_run(hostile_finished_run, tmp_path, case):
    _corpus_case(hostile_finished_run, tmp_path, case, COMMANDS)


@pytest.mark.slow
@pytest.mark.heavy  # every case redoes stages: about 10 minutes of one core in all
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_commands_that_redo_work_on_a_hostile_run(hostile_finished_run, tmp_path, case):
    _corpus_case(hostile_finished_run, tmp_path, case, SLOW_COMMANDS)
