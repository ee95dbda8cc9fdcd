"""The run directory: where every file lives, fingerprints, the per-epoch lock, atomic replacement.

Layout (docs/pools.md describes every file and column):

    RUN/genenv.toml
    RUN/epochs/0003/{tasks.jsonl, tasks.rejects.jsonl, rollouts.parquet, scores.parquet, task_stats.parquet,
                     agent/, env/, agent_update.parquet, env_update.parquet, metrics.json, manifests/<stage>.json}
    RUN/pools/agent_train/epoch=0003.parquet   RUN/pools/env_sft/epoch=0003.parquet
    RUN/evals/<bench>/<model-tag>.json         RUN/logs/<stage>.log

The paths of the data files come from `pools.SCHEMAS` (`RunDir.file`), so a file's place is written once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.config import CONFIG_NAME, Config, load_config
from genenv_cli.errors import ConfigError, InputError, LockError
from genenv_cli.pools import SCHEMAS

POOLS = ("agent_train", "env_sft")
EPOCH_MAX = 99_999  # epochs are folder names (`epochs/0003`): a bound keeps them names, not numbers too big to use
_PARTITION = re.compile(r"^epoch=(\d{4,})\.parquet$")
_SHARD = re.compile(r"\.shard-(\d+)-of-(\d+)$")


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
    return (int(m.group(1)), int(m.group(2))) if m else None


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
        return self.root / "evals"

    def evals_dir(self, bench: str) -> Path:
        return self.evals_root / bench

    def logs_dir(self) -> Path:
        return self.root / "logs"

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def lock_held(path: Path) -> bool:
    """Whether a process holds an exclusive lock on `path` now. Read-only: opened for reading, tested with a
    shared lock (works on read-only storage, creates nothing); False when it cannot be opened."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError:
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


def read_record(path: Path) -> dict[str, Any]:
    """A JSON object the run wrote, leniently: {} when the file is missing, empty, unreadable or not an object.
    The one reader of a lock's holder ({stage, pid, host, since}; a clean exit empties it), also used where a
    damaged file should add nothing rather than fail (`status`)."""
    try:
        info = json.loads(path.read_bytes() or b"{}")
    except (OSError, ValueError, RecursionError):
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
        data = json.loads(path.read_bytes().decode("utf-8"))
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
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fingerprint(path: Path) -> dict[str, Any]:
    """Content hash plus the stat fields used to skip rehashing an untouched file (for a folder: of each file)."""
    st = path.stat()
    if path.is_dir():
        files = _dir_stats(path)
        return {"dir": True, "sha256": _dir_digest(path), "size": sum(f[0] for f in files.values()), "files": files}
    return {"sha256": sha256_file(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _dir_stats(path: Path) -> dict[str, list[int]]:
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(path))] = [st.st_size, st.st_mtime_ns]
    return out


def _dir_digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + b"\0" + sha256_file(p).encode())
    return h.hexdigest()


def unchanged(path: Path, fp: dict[str, Any]) -> bool:
    """True when `path` still has the content `fp` recorded. Same size and mtime: trusted as unchanged
    (as make and git do); otherwise the content is hashed again."""
    if not path.exists():
        return False
    if fp.get("dir"):
        if not path.is_dir():
            return False
        if fp.get("files") is not None and _dir_stats(path) == fp["files"]:
            return True
        return _dir_digest(path) == fp["sha256"]
    st = path.stat()
    if st.st_size != fp.get("size"):
        return False
    if st.st_mtime_ns == fp.get("mtime_ns"):
        return True
    return sha256_file(path) == fp["sha256"]


# ---------------------------------------------------------------- atomic writes

def tmp_name(final: Path) -> Path:
    """A temporary name beside `final`, tagged with the writing process. Under torchrun/accelerate the ranks
    share their launcher's pid, so they agree on the name (only rank 0 writes; some savers need every rank)."""
    owner = os.getppid() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else os.getpid()
    return final.with_name(f".{final.name}.tmp-{owner}")


def old_name(final: Path, pid: int | None = None) -> Path:
    return final.with_name(f".{final.name}.old-{os.getpid() if pid is None else pid}")


def replace_into_place(tmp: Path, final: Path) -> None:
    """Rename a finished file or directory over its final name (atomic for files).

    A folder takes two renames (the old one aside to `.NAME.old-PID`, the new one in): a kill between them
    leaves no `NAME`, and `recover_interrupted` (run before a stage looks at its state) puts the old one back,
    so the previous checkpoint is never lost."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if tmp.is_dir():
        old = old_name(final)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write under `tmp_name` (which `clean_stale_tmp` recognises if the writer is killed), then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


_LEFTOVER = re.compile(r"^\.(.+)\.(tmp|old)-(\d+)$")


def recover_interrupted(directory: Path) -> list[Path]:
    """Put back `.NAME.old-PID` as NAME when NAME is missing and PID is gone: a writer was killed between the
    two renames of `replace_into_place`, and the old copy is the only one. Returns what was put back."""
    restored = []
    if not directory.is_dir():
        return restored
    for p in list(directory.iterdir()):
        m = _LEFTOVER.match(p.name)
        if m and m.group(2) == "old" and not _pid_alive(int(m.group(3))):
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
    whose NAME is missing is put back instead (`recover_interrupted`), never deleted."""
    if not directory.is_dir():
        return
    recover_interrupted(directory)
    for p in directory.iterdir():
        m = _LEFTOVER.match(p.name)
        if m and not _pid_alive(int(m.group(3))):
            if m.group(2) == "old" and not p.with_name(m.group(1)).exists():
                continue  # the only copy (recover_interrupted could not rename it): keep it
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):  # gone already, or read-only storage: harmless either way
                    p.unlink()


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


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
    epoch folder that the lock created and nothing else filled is removed again on exit."""

    def __init__(self, run: RunDir, epoch: int, stage: str, shared: bool = False):
        self.path = run.epoch_dir(epoch) / ".lock"
        self.own = self.path.with_name(f".lock.{stage}") if shared else None
        self.epoch = epoch
        self.stage = stage
        self.shared = shared
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
        if path.is_dir():
            raise InputError(f"{path} is a folder where the epoch's lock file belongs. Move it aside (it holds "
                             f"nothing genenv wrote) and rerun.")
        try:
            return open(path, "a+")  # noqa: SIM115 - held open for the lock's lifetime, closed in __exit__
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            if path.is_file():
                return open(path)  # noqa: SIM115 - read-only storage: flock works on a read-only descriptor
            return None

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
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{folder} is a file where epoch {self.epoch}'s folder belongs. Move it aside and rerun.")
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            self._created_folder = True
        if self.shared:
            self._take(self.path, fcntl.LOCK_SH, record=False)
            self._take(self.own, fcntl.LOCK_EX, record=True)
        else:
            self._take(self.path, fcntl.LOCK_EX, record=True)
        return self

    def __exit__(self, *exc: object) -> None:
        folder = self.path.parent
        empty = self._created_folder and _only_locks(folder)
        for fh, record in reversed(self._fhs):
            if record:
                fh.seek(0)
                fh.truncate()
            if empty and fh is self._fhs[0][0]:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)  # before the unlock: a waiter then sees another inode and retries
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
        self._fhs = []
        if self.own is not None:
            with contextlib.suppress(FileNotFoundError):
                self.own.unlink()
        if empty:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
