"""The epoch lock: one writer per epoch folder, and whether a lock is held. It knows only the folder it locks
and the run's root (for refusing links on the way), not the run's layout."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import GenenvError, InputError, LockError
from genenv_cli.core.safefiles import link_refusal, open_regular, refuse_hard_links, refuse_links_below
from genenv_cli.rundir.records import read_record


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


def only_locks(folder: Path) -> bool:
    """True for a folder holding lock files and nothing else (what a failed command left behind before the lock
    learned to remove the folder it created); an empty folder is not one."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return False
    return bool(names) and all(n == ".lock" or n.startswith(".lock.") for n in names)


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

    `folder` is the epoch's folder (`RunDir.epoch_dir`, named by the epoch's number) and `root` the run's, below
    which no folder on the way may be a link.

    `hand_on=True` is for a holder that is no stage (pruning): a crashed holder's record it finds is written back
    on exit, so the epoch's next stage still reports the crash."""

    def __init__(self, folder: Path, stage: str, *, root: Path, shared: bool = False, hand_on: bool = False):
        self.root = root
        self.path = folder / ".lock"
        self.own = self.path.with_name(f".lock.{stage}") if shared else None
        self.epoch = int(folder.name)
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
        empty = self._created_folder and only_locks(folder)
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
