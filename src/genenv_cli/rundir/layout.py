"""Where every file of a run lives (`RunDir`), finding a run, and the one reader of what it records: manifests,
evaluation results, metrics.json, rollout shards and who holds an epoch's lock."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import CONFIG_NAME, Config, apply_overrides, config_from_dict, load_config
from genenv_cli.core.errors import ConfigError
from genenv_cli.core.paths import cache_dir
from genenv_cli.rundir.evalfiles import read_eval_result, result_paths
from genenv_cli.rundir.lock import lock_held, only_locks
from genenv_cli.rundir.records import read_json, read_record
from genenv_cli.rundir.schemas import SCHEMAS

POOLS = ("agent_train", "env_sft", "env_gen")
# the run's folders outside its epochs, named here only
EVALS, REPORT, STATIC = "evals", "report", "static"
TRACKERS = "trackers"
EPOCH_MAX = 99_999  # epochs are folder names (`epochs/0003`): a bound keeps them names, not numbers too big to use
_PARTITION = re.compile(r"^epoch=(\d{4,})\.parquet$")
_SHARD = re.compile(r"\.shard-(\d{1,6})-of-(\d{1,6})$")
SHARD_MAX = 4_096  # rollout shards of one epoch: a bound keeps `score`'s check of the set (1..N) small


def shard_tag(shard: tuple[int, int]) -> str:
    """The one spelling of rollout shard I of N in names: stage `rollout.shard-I-of-N`, its manifest
    `manifests/rollout.shard-I-of-N.json`, its file `rollouts.shard-I-of-N.parquet`."""
    return f"shard-{shard[0]}-of-{shard[1]}"


def shard_stage(stage: str, shard: tuple[int, int]) -> str:
    """The name of shard I of N of `stage` (its manifest's name and its lock's): `rollout.shard-I-of-N`."""
    return f"{stage}.{shard_tag(shard)}"


def log_name(stage: str) -> str:
    """The stem of RUN/logs/<stem>.log (and .progress) a stage or lock name writes: a shard its own
    (`rollout.shard-2-of-4`), so that shards running at once keep apart; any other dotted name its command's
    (`evaluate.bfcl` -> `evaluate`).

    >>> log_name("rollout.shard-2-of-4"), log_name("evaluate.bfcl"), log_name("score")
    ('rollout.shard-2-of-4', 'evaluate', 'score')
    """
    return stage if shard_of(stage) is not None else stage.split(".")[0]


def shard_of(name: str) -> tuple[int, int] | None:
    """(I, N) from a stage name or file stem that `shard_tag` spelled, None for an unsharded one.

    >>> shard_of("rollout.shard-2-of-4"), shard_of("rollouts.shard-10-of-12"), shard_of("rollout")
    ((2, 4), (10, 12), None)
    """
    m = _SHARD.search(name)
    if not m:
        return None
    i, n = int(m.group(1)), int(m.group(2))
    return (i, n) if 1 <= i <= n <= SHARD_MAX else None  # a name found on disk is data: out of range is no shard


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    def load_config(self, overrides: list[str] | None = None) -> Config:
        return load_config(self.config_path, overrides)

    def epoch_dir(self, epoch: int) -> Path:
        return self.root / "epochs" / f"{epoch:04d}"

    def manifest_path(self, epoch: int, stage: str) -> Path:
        return self.manifests_dir(epoch) / f"{stage}.json"

    def manifests_dir(self, epoch: int) -> Path:
        return self.epoch_dir(epoch) / "manifests"

    def checkpoint_dir(self, epoch: int, role: str) -> Path:
        """The model `update-agent` (role "agent") or `update-env` (role "env") wrote for the epoch."""
        return self.epoch_dir(epoch) / role

    def metrics_path(self, epoch: int) -> Path:
        return self.epoch_dir(epoch) / "metrics.json"

    def file(self, key: str, epoch: int, shard: tuple[int, int] | None = None) -> Path:
        """The epoch's file `key` of `schemas.SCHEMAS` (`tasks`, `task_stats`, `agent_train`, ...) where its schema
        says it lives; a rollout shard's file carries `shard_tag` before the suffix."""
        path = self.root / SCHEMAS[key].path.replace("NNNN", f"{epoch:04d}")
        return path if shard is None else path.with_name(f"{path.stem}.{shard_tag(shard)}{path.suffix}")

    def pool_dir(self, pool: str) -> Path:
        return self.file(pool, 0).parent

    def pool_partition(self, pool: str, epoch: int) -> Path:
        return self.file(pool, epoch)

    def pool_partitions(self, pool: str) -> dict[int, Path]:
        """Existing partitions of a pool, by epoch."""
        found: dict[int, Path] = {}
        d = self.pool_dir(pool)
        if d.is_dir():
            for p in d.iterdir():
                m = _PARTITION.match(p.name)
                if m:
                    found[int(m.group(1))] = p
        return dict(sorted(found.items()))

    def epochs(self) -> list[int]:
        """Epochs with something in their folder (a folder holding only a lock file is no epoch: a command that
        failed before writing anything)."""
        d = self.root / "epochs"
        if not d.is_dir():
            return []
        found = []
        for p in d.iterdir():
            if p.name.isdigit() and len(p.name) <= len(str(EPOCH_MAX)) and 1 <= int(p.name) <= EPOCH_MAX \
                    and p.is_dir() and (not only_locks(p) or any(lock_held(f) for f in p.iterdir())):
                found.append(int(p.name))
        return sorted(found)

    @property
    def evals_root(self) -> Path:
        return self.root / EVALS

    def evals_dir(self, bench: str) -> Path:
        return self.evals_root / bench

    def epoch_eval_paths(self, epoch: int, bench: str) -> tuple[Path, Path]:
        """(result, samples) of the epoch's `eval-agent` on `bench`: `epochs/NNNN/evals/<bench>.json` (what `genenv
        evaluate` writes, plus `"stage": "eval-agent"`) and `<bench>.samples.jsonl` beside it."""
        return result_paths(self.epoch_dir(epoch) / EVALS, bench)

    def trackers_dir(self) -> Path:
        """What `run.report_to`'s trackers keep in the run (genenv_cli/trackers): event files, W&B's folder, records."""
        return self.root / TRACKERS

    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def report_dir(self) -> Path:
        """Where `genenv report` writes report.html and its PNG charts by default."""
        return self.root / REPORT

    def static_tasks(self, domain: str | None = None) -> Path:
        """The `static` mode's task set, generated once: RUN/static/tasks.jsonl, or RUN/static/<domain>/tasks.jsonl
        for each domain of a mixed run."""
        return self.root / STATIC / (domain or "") / self.file("tasks", 0).name

    # ------------------------------------------------------------ outputs outside the epochs

    def output_dir(self, kind: str, *below: str) -> tuple[Path, bool]:
        """(folder, moved) for the run's `report` or `evals` output: RUN/<kind> when files can be created there
        (in its subfolder `below`, when given), else (read-only storage) a folder of the user cache kept for this
        run, with moved True. Reading a finished run works on read-only storage; only where its outputs go
        changes."""
        folder = {REPORT: self.report_dir, EVALS: self.evals_root}[kind]
        if writable(folder.joinpath(*below)):
            return folder, False
        tag = hashlib.sha256(str(self.root).encode()).hexdigest()[:8]
        return cache_dir() / kind / f"{self.root.name}-{tag}", True

    # ------------------------------------------------------------ manifests

    def read_manifest(self, epoch: int, stage: str, what: str | None = None) -> dict[str, Any]:
        """The stage's manifest, a JSON object: InputError naming the file when it is unreadable, not UTF-8, not
        JSON or not an object (`what` names it in the message; default "stage manifest")."""
        return read_json(self.manifest_path(epoch, stage), what or "stage manifest")

    def manifests(self, epoch: int) -> dict[str, dict[str, Any]]:
        """Every readable manifest of the epoch by stage name (shards included), leniently: a file that is not a
        JSON object, a link or a device is left out (`status` and the numbers show such a stage as it is, the
        stage's own check calls it incomplete). {} when the manifests folder is a link or not a folder."""
        folder = self.manifests_dir(epoch)
        if folder.is_symlink() or not folder.is_dir():
            return {}
        found = {}
        for path in sorted(folder.glob("*.json")):
            data = read_record(path, follow=False, limit=None)
            if data:
                found[path.stem] = data
        return found

    def recorded_output(self, epoch: int, stage: str, name: str) -> dict[str, Any] | None:
        """{path, fingerprint} the stage's manifest recorded for its output `name`; None when there is no such
        manifest or record (absent, edited or damaged)."""
        rec = read_record(self.manifest_path(epoch, stage), follow=False, limit=None).get("outputs")
        rec = rec.get(name) if isinstance(rec, dict) else None
        ok = isinstance(rec, dict) and isinstance(rec.get("path"), str) and isinstance(rec.get("fingerprint"), dict)
        return rec if ok else None

    def rollout_shards(self, epoch: int) -> list[tuple[int, int]]:
        """(I, N) of every rollout shard of the epoch with a manifest, sorted. A name found on disk is data: only
        names `shard_tag` spells, in range (SHARD_MAX), count."""
        folder = self.manifests_dir(epoch)
        if folder.is_symlink() or not folder.is_dir():
            return []
        return sorted(s for p in folder.glob("rollout.shard-*.json")
                      if (s := shard_of(p.stem)) and p.stem == shard_stage("rollout", s))

    def manifest_record(self, epoch: int, stage: str) -> dict[str, Any]:
        """The stage's manifest leniently: {} when it is absent, unreadable or not a JSON object (`status` shows
        what it can of a stage whose plan cannot be built)."""
        return read_record(self.manifest_path(epoch, stage))

    def running(self, epoch: int) -> dict[str, dict[str, Any]]:
        """Stages holding the epoch's lock right now: {stage: the holder's record}. Read-only: the lock files are
        opened for reading and tested with a shared lock, so this works on read-only storage and creates nothing."""
        path = self.epoch_dir(epoch) / ".lock"
        running: dict[str, dict[str, Any]] = {}
        if lock_held(path):
            info = read_record(path)
            if info.get("stage"):
                return {str(info["stage"]): info}
        for own in path.parent.glob(".lock.*"):  # rollout shards share the epoch lock and each hold their own
            if lock_held(own):
                info = read_record(own)
                running[str(info.get("stage", own.name[6:]))] = info
        return running

    # ------------------------------------------------------------ metrics.json and evaluation results

    def read_metrics_file(self, epoch: int) -> dict[str, Any] | None:
        """epochs/N/metrics.json as a JSON object; None when absent. InputError naming it when it is not one.
        (The numbers come from the manifests, `metrics.gather`; the file is read only for an epoch kept without
        them, as archived results are.)"""
        path = self.metrics_path(epoch)
        if not path.exists():
            return None
        return read_json(path, "metrics.json (the object of per-epoch numbers that every stage rewrites)")

    def read_evals(self, bench: str | None = None) -> list[tuple[Path, dict[str, Any]]]:
        """(path, result) of every `evals/<bench>/<model-tag>.json` `genenv evaluate` wrote and every
        `epochs/NNNN/evals/<bench>.json` the eval-agent stage wrote (of one benchmark when `bench` is given), sorted
        by path, each checked for the keys its readers use (`headline` {name, value},
        `epoch` an integer or null, `model_tag` and `protocol` strings, `config` an object when present): an
        InputError names the file and what was expected. The `*.samples.jsonl` beside them are not read."""
        root = self.evals_root
        paths = []
        if root.is_dir():
            paths = sorted((root / bench).glob("*.json") if bench is not None else root.glob("*/*.json"))
        for epoch in self.epochs():  # eval-agent's, committed with its manifest
            folder = self.epoch_dir(epoch) / EVALS
            if folder.is_dir() and not folder.is_symlink():
                paths += sorted(folder.glob(f"{bench}.json" if bench is not None else "*.json"))
        return [(path, read_eval_result(path)) for path in paths]

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def writable(folder: Path) -> bool:
    """Whether files can be created in `folder` (or, when it does not exist yet, in its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        return False
    import tempfile  # here: it imports `random`, a cost `genenv status` would pay on every start

    try:  # os.access says yes to root on a read-only mount: ask the file system itself
        with tempfile.TemporaryFile(dir=probe):
            return True
    except OSError:
        return False


def find_run(run: Path | None) -> RunDir:
    """--run DIR, else $GENENV_RUN, else the current directory."""
    if run is None:
        env = os.environ.get("GENENV_RUN")
        run = Path(env) if env else Path.cwd()
    run = run.expanduser().resolve()
    if (run / CONFIG_NAME).is_dir():
        raise ConfigError(f"{run / CONFIG_NAME} is a folder; the run's config must be a TOML file. Move the folder "
                          f"aside and write the config with `genenv init {run} --force`.")
    if not (run / CONFIG_NAME).exists():
        raise ConfigError(f"{run}: not a genenv run (no {CONFIG_NAME}). Create one with `genenv init {run}`, "
                          f"or point at one with --run DIR or GENENV_RUN.")
    return RunDir(run)


def open_run(run: Path | None, overrides: list[str], *, required: bool = True) -> tuple[RunDir | None, Config]:
    """(run, its config with `overrides`) found by `find_run`. `required=False` is for a command that can work
    without a run (evaluate --model, --predictions, --export): when no run is found there (and none was named)
    it gets (None, the defaults with `overrides`)."""
    try:
        found = find_run(run)
        return found, found.load_config(overrides)
    except ConfigError:
        if required or run is not None:
            raise
        return None, config_from_dict(apply_overrides({}, overrides), "--set") if overrides else Config()


