"""The run directory: where every file lives, reading what the run records, fingerprints, the per-epoch lock,
atomic replacement.

Layout (docs/pools.md describes every file and column):

    RUN/genenv.toml
    RUN/epochs/0003/{tasks.jsonl, tasks.rejects.jsonl, rollouts.parquet, scores.parquet, task_stats.parquet,
                     agent/, env/, agent_update.parquet, env_update.parquet, metrics.json, manifests/<stage>.json}
    RUN/pools/agent_train/epoch=0003.parquet   RUN/pools/env_sft/epoch=0003.parquet
    RUN/evals/<bench>/<model-tag>.json         RUN/logs/<stage>.log
    RUN/report/report.html                     RUN/static/[<domain>/]tasks.jsonl

`RunDir` owns these files: no other module builds a path into a run or opens one (tests/test_run_files.py);
they ask it for the path, or for the content. The paths of the data files come from `pools.SCHEMAS`
(`RunDir.file`), so a file's place is written once, and the data files are read through `pools` with their
schema. The JSON the run records is read here: manifests (`read_manifest`, strict; `manifests` and
`manifest_record`, lenient, for status and the numbers), evaluation results (`read_evals`), an archived
metrics.json (`read_metrics_file`), rollout shards (`rollout_shards`) and who holds the lock (`running`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli import writers
from genenv_cli.config import CONFIG_NAME, Config, apply_overrides, config_from_dict, load_config
from genenv_cli.errors import ConfigError, GenenvError, InputError, LockError
from genenv_cli.paths import cache_dir
from genenv_cli.pools import SCHEMAS
from genenv_cli.safefiles import (
    RECORD_MAX,
    link_refusal,
    open_new,
    open_regular,
    read_regular,
    refuse_hard_links,
    refuse_links_below,
    remove_entry,
)

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
        """The epoch's file `key` of `pools.SCHEMAS` (`tasks`, `task_stats`, `agent_train`, ...) where its schema
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
                    and p.is_dir() and (not _only_locks(p) or any(lock_held(f) for f in p.iterdir())):
                found.append(int(p.name))
        return sorted(found)

    @property
    def evals_root(self) -> Path:
        return self.root / EVALS

    def evals_dir(self, bench: str) -> Path:
        return self.evals_root / bench

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
        """(path, result) of every `evals/<bench>/<model-tag>.json` `genenv evaluate` wrote (of one benchmark when
        `bench` is given), sorted by path, each checked for the keys its readers use (`headline` {name, value},
        `epoch` an integer or null, `model_tag` and `protocol` strings, `config` an object when present): an
        InputError names the file and what was expected. The `*.samples.jsonl` beside them are not read."""
        root = self.evals_root
        if not root.is_dir():
            return []
        paths = sorted((root / bench).glob("*.json") if bench is not None else root.glob("*/*.json"))
        return [(path, _eval_result(path)) for path in paths]

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def lock_held(path: Path) -> bool:
    """Whether a process holds an exclusive lock on `path` now. Read-only: opened for reading without following a
    link, tested with a shared lock (works on read-only storage, creates nothing); False when it cannot be
    opened or is not a regular file."""
    try:
        fh = os.fdopen(open_regular(path, follow=False), "rb")
    except (OSError, GenenvError):
        return False
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def read_record(path: Path, *, follow: bool = True, limit: int | None = RECORD_MAX) -> dict[str, Any]:
    """A JSON object the run wrote, leniently: {} when the file is missing, empty, unreadable or not an object.
    The one reader of a lock's holder ({stage, pid, host, since}; a clean exit empties it), also used where a
    damaged file should add nothing rather than fail (`status`, the epoch's numbers). `follow=False` also reads
    nothing through a symbolic link; `limit=None` reads the whole file (a manifest: a score of 4,096 shards
    records that many inputs)."""
    try:
        info = json.loads(read_regular(path, limit=limit, follow=follow) or b"{}")
    except (OSError, ValueError, RecursionError, GenenvError):
        return {}
    return info if isinstance(info, dict) else {}


def _only_locks(folder: Path) -> bool:
    """True for a folder holding lock files and nothing else (what a failed command left behind before the lock
    learned to remove the folder it created); an empty folder is not one."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return False
    return bool(names) and all(n == ".lock" or n.startswith(".lock.") for n in names)


def read_json(path: Path, what: str, expect: type = dict) -> Any:
    """A JSON file the run wrote (a manifest, metrics.json, a lock's record), checked for its shape: InputError
    naming the file and what was expected when it is unreadable, not UTF-8, not JSON or of the wrong type."""
    try:
        data = json.loads(read_regular(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not a valid {what} ({type(exc).__name__}: {str(exc)[:120]}). It was changed by "
                         f"hand or damaged; remove it and rerun the stage that writes it.") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc}).") from None
    if not isinstance(data, expect):
        raise InputError(f"{path}: not a valid {what}: expected a JSON {'object' if expect is dict else expect.__name__}, "
                         f"got {type(data).__name__}. It was changed by hand or damaged; remove it and rerun the "
                         f"stage that writes it.")
    return data


_EVAL_EXPECTED = ('expected {"bench", "model_tag", "epoch": int|null, "protocol", "headline": {"name", "value"}, '
                  '...} as written by `genenv evaluate`')


def _eval_result(path: Path) -> dict[str, Any]:
    """One evaluation result, checked for the keys its readers use (`RunDir.read_evals`)."""
    where = str(path)
    try:
        data = json.loads(read_regular(path).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{where}: not valid JSON ({exc}); expected the result object `genenv evaluate` "
                         f"writes. Rerun the evaluation or remove the file.") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read the evaluation result ({exc.strerror or exc}).") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: {_EVAL_EXPECTED}; got {type(data).__name__}.")
    head = data.get("headline")
    if not isinstance(head, dict) or not isinstance(head.get("name"), str) or "value" not in head:
        raise InputError(f"{where}: `headline` missing or malformed; {_EVAL_EXPECTED}.")
    epoch = data.get("epoch")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise InputError(f"{where}: `epoch` must be an integer or null, got {json.dumps(epoch)[:40]}; "
                         f"{_EVAL_EXPECTED}.")
    for key in ("model_tag", "protocol"):
        if not isinstance(data.get(key), str):
            raise InputError(f"{where}: `{key}` must be a string; {_EVAL_EXPECTED}.")
    if not isinstance(data.get("config", {}), dict):
        raise InputError(f"{where}: `config` must be an object; {_EVAL_EXPECTED}.")
    return data


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


PRUNED = "pruned.json"  # epochs/N/pruned.json: the checkpoints run.keep_checkpoints deleted (pruning.py)


def read_pruned(run: RunDir, epoch: int) -> dict[str, Any]:
    """epochs/N/pruned.json by output path ({fingerprint, pruned}); {} when absent or unreadable. A regular file
    only: a device or pipe planted there is never read."""
    try:
        data = json.loads(read_regular(run.epoch_dir(epoch) / PRUNED, limit=1 << 22).decode("utf-8"))
    except (OSError, ValueError, InputError):
        return {}
    return data if isinstance(data, dict) else {}


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


# ---------------------------------------------------------------- fingerprints

def sha256_file(path: Path) -> str:
    """sha256 of a regular file (a device or pipe is refused, see `open_regular`: /dev/zero never ends)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fingerprint(path: Path) -> dict[str, Any]:
    """Content hash plus the stat fields used to skip rehashing an untouched file (for a folder: of each file)."""
    st = path.stat()
    if stat.S_ISDIR(st.st_mode):
        files = _dir_stats(path)
        return {"dir": True, "sha256": _dir_digest(path), "size": sum(f[0] for f in files.values()), "files": files}
    if not stat.S_ISREG(st.st_mode):
        sha256_file(path)  # raises, naming it
    return {"sha256": sha256_file(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _dir_entries(path: Path) -> list[tuple[str, os.stat_result]]:
    """(relative name, lstat) of everything under a folder, sorted, links never followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(path):  # os.walk does not descend into linked folders
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if not stat.S_ISDIR(st.st_mode):
                out.append((os.path.relpath(full, path), st))
    return sorted(out)


def _dir_stats(path: Path) -> dict[str, list[int]]:
    # a link or a device inside an output folder is recorded by name with size -1 (never opened), so one put
    # there by hand makes the folder differ from what its manifest recorded
    return {rel: [st.st_size if stat.S_ISREG(st.st_mode) else -1, st.st_mtime_ns] for rel, st in _dir_entries(path)}


def _dir_digest(path: Path) -> str:
    h = hashlib.sha256()
    for rel, st in _dir_entries(path):
        digest = sha256_file(path / rel) if stat.S_ISREG(st.st_mode) else f"not-a-file:{stat.S_IFMT(st.st_mode)}"
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + digest.encode())
    return h.hexdigest()


def unchanged(path: Path, fp: dict[str, Any]) -> bool:
    """True when `path` still has the content `fp` recorded. Same size and mtime: trusted as unchanged
    (as make and git do); otherwise the content is hashed again."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if fp.get("dir"):
        if not stat.S_ISDIR(st.st_mode):
            return False
        if fp.get("files") is not None and _dir_stats(path) == fp["files"]:
            return True
        return _dir_digest(path) == fp["sha256"]
    if not stat.S_ISREG(st.st_mode):  # a folder, a device or a pipe where a file was recorded: never read it
        return False
    if st.st_size != fp.get("size"):
        return False
    if st.st_mtime_ns == fp.get("mtime_ns"):
        return True
    return sha256_file(path) == fp["sha256"]


# ---------------------------------------------------------------- atomic writes

def writer_id() -> int:
    """The id in this process's temporary and old names. Under torchrun/accelerate the ranks share their
    launcher's pid, so they agree on the name (only rank 0 writes; some savers need every rank)."""
    return os.getppid() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else os.getpid()


def tmp_name(final: Path, pid: int | None = None) -> Path:
    """A temporary name beside `final`, tagged with the writing process (`writer_id`)."""
    return final.with_name(f".{final.name}.tmp-{writer_id() if pid is None else pid}")


def old_name(final: Path, pid: int | None = None) -> Path:
    """Where a commit keeps the previous `final` until the new one is in place (`swap_in`)."""
    return final.with_name(f".{final.name}.old-{writer_id() if pid is None else pid}")


def replace_into_place(tmp: Path, final: Path) -> None:
    """Rename a finished file or directory over its final name (atomic for files); what is at `final` is
    replaced, never followed (a link there is replaced, its target untouched).

    A folder takes two renames (the old one aside to `.NAME.old-PID`, the new one in): a kill between them
    leaves no `NAME`, and `recover_interrupted` (run before a stage looks at its state) puts the old one back,
    so the previous copy is never lost. The stages commit with `swap_in`, which does this for every output."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if tmp.is_dir():
        old = old_name(final)
        if os.path.lexists(final):
            remove_entry(old)
            os.replace(final, old)
        os.replace(tmp, final)
        with contextlib.suppress(OSError):
            remove_entry(old)
    else:
        os.replace(tmp, final)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write under `tmp_name` (created afresh, never through a link; `clean_stale_tmp` recognises it if the
    writer is killed), then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    try:
        with open_new(tmp) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_entry(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, json_bytes(obj))


def write_new(path: Path, data: bytes) -> None:
    """Write a temporary file of a commit: created afresh (never through a link), flushed to disk."""
    with open_new(path) as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def swap_in(pairs: list[tuple[Path, Path]], intent: Path, manifest: Path) -> None:
    """The commit of a stage (docs/design.md, "Commit order"). `pairs` are (temporary, final) names of its
    outputs and derived files, all written; `intent` is its new manifest under its temporary name, written and
    flushed. Each final is moved aside to `.NAME.old-ID` and its new version renamed in; then the manifest is
    renamed in (the commit point), then the old copies are deleted. A failure before the commit point puts
    every old copy back and removes what was renamed in, so the previous outputs and manifest stand; a kill
    there is resolved by `recover_commit` on the next run the same way, since `intent` still exists."""
    moved: list[tuple[Path, Path, Path | None]] = []
    try:
        for tmp, final in pairs:
            old = None
            if os.path.lexists(final):
                old = old_name(final)
                remove_entry(old)
                os.replace(final, old)
            moved.append((tmp, final, old))
            os.replace(tmp, final)
        os.replace(intent, manifest)  # the commit point
    except BaseException:
        for tmp, final, old in reversed(moved):
            if not os.path.lexists(tmp):  # its new version was renamed in
                remove_entry(final)
            if old is not None:
                os.replace(old, final)
        raise
    for folder in {manifest.parent, *(final.parent for _, final, _ in moved)}:
        fsync_folder(folder)  # the renames themselves reach the disk
    for _, _, old in moved:
        if old is not None:
            with contextlib.suppress(OSError):  # left for the next run's recovery
                remove_entry(old)


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (renames, new names) to disk; best effort (some file systems refuse it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def manifest_digest(manifest: Path) -> str | None:
    """sha256 of the committed manifest's bytes (None when there is none): what an intent records it supersedes,
    so recovery can tell whether the manifest is still the one it was meant to replace."""
    try:
        return hashlib.sha256(read_regular(manifest, follow=False)).hexdigest()
    except FileNotFoundError:
        return None
    except (OSError, GenenvError):
        return "unreadable"


def recover_commit(finals: dict[str, Path], manifest: Path, root: Path) -> list[str]:
    """Resolve what a killed `swap_in` left for these outputs (`finals`: path relative to `root` -> path) and
    this manifest, for every writer id that is no longer alive (`writers.alive`, with the writer's identity
    when its intent recorded one):

    - its intent (`.STAGE.json.tmp-ID`) is still there and the committed manifest is still the one it
      `supersedes`: the commit point was not reached, so it is undone: each `.NAME.old-ID` goes back to NAME,
      and a NAME that has no old copy but is the new output the intent records (a stage's first run) is removed;
    - its intent is there but another commit came after it (the manifest is not the one it superseded): the
      intent is stale and discarded with its old copies, which are older than what is committed now. Recovery
      is ordered by commit: an intent never undoes a later commit;
    - no intent: the commit happened (or a writer of an older genenv was killed between the two renames of a
      folder): an old copy is deleted when NAME exists, put back when it does not.

    Then the writer's temporary files and intent are removed. Returns what it did, one line each."""
    done: list[str] = []
    ids: set[int] = set()
    for final in [*finals.values(), manifest]:
        ids.update(_leftover_ids(final))
    for pid in sorted(ids):
        intent = tmp_name(manifest, pid)
        record = _record(intent) if os.path.lexists(intent) else {}
        if writers.alive(pid, record.get("writer") if isinstance(record.get("writer"), dict) else None):
            continue
        if os.path.lexists(intent) and not _still_current(record, manifest):
            for final in finals.values():
                if os.path.lexists(old_name(final, pid)):
                    remove_entry(old_name(final, pid))
            done.append(f"discarded an unfinished commit of {manifest.stem} that a later commit superseded")
        elif os.path.lexists(intent):
            recorded = _outputs_of(record)
            committed = _outputs_of(_record(manifest)) if os.path.lexists(manifest) else {}
            for rel, final in finals.items():
                old = old_name(final, pid)
                if os.path.lexists(old):
                    remove_entry(final)
                    os.replace(old, final)
                    done.append(f"put back the previous {rel}")
                elif os.path.lexists(final) and not final.is_symlink() and rel in recorded \
                        and unchanged(final, recorded[rel]) \
                        and not (rel in committed and unchanged(final, committed[rel])):
                    remove_entry(final)  # new, with no previous copy, and no committed manifest vouches for it
                    done.append(f"removed {rel}, written by an unfinished run")
        else:
            for rel, final in finals.items():
                old = old_name(final, pid)
                if os.path.lexists(old):
                    if os.path.lexists(final):
                        remove_entry(old)
                    else:
                        os.replace(old, final)
                        done.append(f"put back the previous {rel}")
        for final in [*finals.values(), manifest]:
            remove_entry(tmp_name(final, pid))
    return done


def _still_current(intent: dict[str, Any], manifest: Path) -> bool:
    """Whether the committed manifest is still the one the intent was written to replace. An intent of an older
    genenv records nothing: then a committed manifest that finished after it is a later commit."""
    if "supersedes" in intent:
        return intent["supersedes"] == manifest_digest(manifest)
    committed = _record(manifest) if os.path.lexists(manifest) else {}
    theirs, ours = committed.get("finished"), intent.get("finished")
    return not (isinstance(theirs, str) and isinstance(ours, str) and theirs > ours)


def dead_leftovers(final: Path) -> list[Path]:
    """The temporary and old copies of `final` (`.NAME.tmp-ID`, `.NAME.old-ID`) whose writer is gone: for a file
    written whole by `write_bytes_atomic` (pruned.json), where an old copy is never the only one."""
    return [p for pid in sorted(_leftover_ids(final)) if not writers.alive(pid)
            for p in (tmp_name(final, pid), old_name(final, pid)) if os.path.lexists(p)]


def _leftover_ids(final: Path) -> set[int]:
    """Writer ids of `.NAME.tmp-ID` and `.NAME.old-ID` beside `final`."""
    prefix = f".{final.name}."
    found: set[int] = set()
    try:
        names = os.listdir(final.parent)
    except OSError:
        return found
    for name in names:
        if name.startswith(prefix):
            m = _LEFTOVER.match(name)
            if m and m.group(1) == final.name:
                found.add(int(m.group(3)))
    return found


def _record(path: Path) -> dict[str, Any]:
    """A manifest or an intent as a JSON object, never through a link; {} when it was cut short or is not one."""
    try:
        data = json.loads(read_regular(path, follow=False))
    except (OSError, ValueError, RecursionError, GenenvError):
        return {}
    return data if isinstance(data, dict) else {}


def _outputs_of(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{path: fingerprint} of the outputs a manifest (or an unfinished commit's intent) records."""
    try:
        return {rec["path"]: rec["fingerprint"] for rec in record["outputs"].values()
                if isinstance(rec, dict) and isinstance(rec.get("fingerprint"), dict)}
    except (KeyError, TypeError, AttributeError):
        return {}


# a writer's id is data found on disk: any run of digits is read, and one out of range is a dead writer
_LEFTOVER = re.compile(r"^\.(.+)\.(tmp|old)-(\d{1,30})$")


def recover_interrupted(directory: Path) -> list[Path]:
    """Put back `.NAME.old-PID` as NAME when NAME is missing and PID is gone: a writer was killed between the
    two renames of `replace_into_place`, and the old copy is the only one. Returns what was put back."""
    restored = []
    if not directory.is_dir():
        return restored
    for p in list(directory.iterdir()):
        m = _LEFTOVER.match(p.name)
        if m and m.group(2) == "old" and not writers.alive(int(m.group(3))):
            final = p.with_name(m.group(1))
            if not final.exists() and not final.is_symlink():
                try:
                    os.replace(p, final)
                except OSError as exc:  # read-only storage: say what to do rather than fail obscurely
                    raise InputError(f"{final} is missing and its previous copy is {p} (a writer was killed "
                                     f"between two renames), but it cannot be put back ({exc.strerror}). Rename it "
                                     f"back by hand, or rerun on writable storage.") from None
                restored.append(final)
    return restored


def clean_stale_tmp(directory: Path) -> None:
    """Remove leftovers of killed writers (`.NAME.tmp-PID`, `.NAME.old-PID`) whose process is gone; an old copy
    whose NAME is missing is put back instead (`recover_interrupted`), never deleted. For folders outside the
    stage contract (evaluations, the static task set); a stage's own leftovers are `recover_commit`'s."""
    if not directory.is_dir():
        return
    recover_interrupted(directory)
    for p in directory.iterdir():
        m = _LEFTOVER.match(p.name)
        if m and not writers.alive(int(m.group(3))):
            if m.group(2) == "old" and not p.with_name(m.group(1)).exists():
                continue  # the only copy (recover_interrupted could not rename it): keep it
            with contextlib.suppress(OSError):  # gone already, or read-only storage: harmless either way
                remove_entry(p)


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


# ---------------------------------------------------------------- the lock

class EpochLock:
    """One writer per epoch: an advisory `flock` on `epochs/NNNN/.lock`, released by the kernel when the
    holder exits or is killed, so a crash never leaves a stale lock behind. The holder's pid, host and stage
    are written into the file so a second process can name it, and emptied on a clean exit: a record found by
    the next holder means the previous one crashed or was killed (`crashed` holds it).

    `shared=True` is for rollout shards, which write disjoint files and may run side by side: they share the
    epoch lock (so no other stage of the epoch runs meanwhile) and each holds `.lock.<stage>` exclusively.

    On read-only storage the lock file is opened read-only (flock still works) or, if it does not exist, not
    taken at all: nothing can be written there anyway, and a no-op rerun must still be able to say so. An
    epoch folder that the lock created and nothing else filled is removed again on exit.

    `hand_on=True` is for a holder that is no stage (pruning): a crashed holder's record it finds is written back
    on exit, so the epoch's next stage still reports the crash."""

    def __init__(self, run: RunDir, epoch: int, stage: str, shared: bool = False, hand_on: bool = False):
        self.root = run.root
        self.path = run.epoch_dir(epoch) / ".lock"
        self.own = self.path.with_name(f".lock.{stage}") if shared else None
        self.epoch = epoch
        self.stage = stage
        self.shared = shared
        self.hand_on = hand_on
        self.crashed: dict[str, Any] | None = None
        self._fhs: list = []
        self._created_folder = False

    def _holder(self, path: Path) -> str:
        info = read_record(path)
        if not info:
            others = sorted(p.name[len(".lock."):] for p in path.parent.glob(".lock.*"))
            return f"`{', '.join(others)}`" if others else "another process"
        return f"`{info.get('stage')}` (pid {info.get('pid')} on {info.get('host')}, since {info.get('since')})"

    def _open(self, path: Path) -> Any:
        """The lock file, opened without following a link (a link there is refused, naming it: a lock that
        followed one would empty the file it points to, and a dangling one would create its target)."""
        if path.is_dir() and not path.is_symlink():
            raise InputError(f"{path} is a folder where the epoch's lock file belongs. Move it aside (it holds "
                             f"nothing genenv wrote) and rerun.")
        nofollow = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        mode = "a+"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | nofollow, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise link_refusal(path, "the epoch's lock file") from None
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            try:  # read-only storage: flock works on a read-only descriptor
                fd = os.open(path, os.O_RDONLY | nofollow)
            except FileNotFoundError:
                return None
            except OSError as again:
                if again.errno == errno.ELOOP:
                    raise link_refusal(path, "the epoch's lock file") from None
                raise
            mode = "r"
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputError(f"{path} is a device, pipe or socket where the epoch's lock file belongs. Move it "
                             f"aside and rerun.")
        if mode != "r":  # the holder's record is written into it in place: never into a file with other names
            try:
                refuse_hard_links(fd, path, "the epoch's lock file")
            except InputError:
                os.close(fd)
                raise
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)  # held open for the lock's lifetime, closed in __exit__

    def _take(self, path: Path, mode: int, record: bool) -> None:
        while True:
            fh = self._open(path)
            if fh is None:  # read-only storage and no lock file: nothing can write here, so nothing to exclude
                return
            try:
                fcntl.flock(fh.fileno(), mode | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                self.__exit__()
                raise LockError(f"epoch {self.epoch} is locked by {self._holder(path)}; `{self.stage}` will not run "
                                f"beside it. Wait for it to finish, or stop it. Lock file: {path}") from None
            try:  # the previous holder may have removed the file (an empty epoch folder) before we locked it
                same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            fh.close()
            path.parent.mkdir(parents=True, exist_ok=True)
        writable = fh.mode != "r"
        if record and writable:
            fh.seek(0)
            previous = fh.read()
            if previous.strip():
                with contextlib.suppress(ValueError):
                    info = json.loads(previous)
                    if isinstance(info, dict) and info.get("pid"):
                        self.crashed = info
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"stage": self.stage, "pid": os.getpid(), "host": os.uname().nodename,
                                 "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
            fh.flush()
        self._fhs.append((fh, record and writable))

    def __enter__(self) -> EpochLock:
        folder = self.path.parent
        refuse_links_below(self.root, folder, "an epoch's folder")
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{folder} is a file where epoch {self.epoch}'s folder belongs. Move it aside and rerun.")
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            self._created_folder = True
        try:
            if self.shared:
                self._take(self.path, fcntl.LOCK_SH, record=False)
                self._take(self.own, fcntl.LOCK_EX, record=True)
            else:
                self._take(self.path, fcntl.LOCK_EX, record=True)
        except BaseException:  # a refused lock file: release what was taken, and the folder this lock made
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        folder = self.path.parent
        empty = self._created_folder and _only_locks(folder)
        # a shard's own lock file is removed only by the process that held it (one that failed to take it leaves
        # the holder's file alone), before the unlock: a waiter then sees another inode and retries
        own = self._fhs[1][0] if self.own is not None and len(self._fhs) == 2 else None
        for fh, record in reversed(self._fhs):
            if record:
                fh.seek(0)
                fh.truncate()
                if self.hand_on and self.crashed:
                    fh.write(json.dumps(self.crashed))
                    fh.flush()
            if (empty and fh is self._fhs[0][0]) or fh is own:
                with contextlib.suppress(OSError):
                    os.unlink(self.path if fh is not own else self.own)
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
        self._fhs = []
        if empty:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
