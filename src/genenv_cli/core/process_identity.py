"""Who wrote a leftover, and whether that process still runs: a writer's identity beyond its PID.

A killed writer leaves names tagged with its PID (`.NAME.tmp-PID`, `.NAME.old-PID`), and a stage's commit leaves
an intent (its new manifest under a temporary name) that records the writer in full: `identity()`. A PID alone
is not an identity. The kernel reuses PIDs, so an unrelated process may hold a dead writer's PID for hours; a PID
written on another machine, or in another PID namespace (a container), names some other process here or none;
and a suffix found on disk may be no PID at all (`9999999999`, past what `os.kill` accepts). So a writer is alive
only when its PID is in range and, where its start time was recorded (field 22 of /proc/PID/stat, clock ticks
since boot), a process with that PID started at that tick of this boot, on this host.

The standard library has no portable way to read a process's start time (psutil has, at the cost of a compiled
dependency), and /proc's one line is all that is needed here, hence the few lines below.
"""

from __future__ import annotations

import errno
import functools
import os
from typing import Any

PID_LIMIT = 1 << 22  # Linux's PID_MAX_LIMIT: no kernel hands out a PID at or above it (macOS and BSD stop near 10^5)


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat, field 22); None when there is no
    such process or no /proc."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            raw = fh.read()
        # field 2, the command name, is in parentheses and may itself hold spaces and ')': count after the last
        fields = raw[raw.rindex(b")") + 2:].split()
        return int(fields[19])  # fields[0] is field 3
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _proc_works() -> bool:
    return process_start(os.getpid()) is not None


@functools.cache
def boot_id() -> str | None:
    """This boot's id (Linux); a start time is a tick count since boot, so it is compared within one boot only."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except (OSError, ValueError):
        return None


def identity(pid: int) -> dict[str, Any]:
    """What a commit's intent records of its writer (`pid` is the writing process: `rundir.writer_id`)."""
    return {"pid": pid, "start": process_start(pid), "boot": boot_id(), "host": os.uname().nodename}


def alive(pid: int, recorded: dict[str, Any] | None = None) -> bool:
    """Whether the writer `pid` (with its `identity()` record, when one was kept) may still be running here.

    Dead: a PID out of range; a writer recorded on another host (its files are only ever resolved under the
    epoch's lock, which that writer would hold while it runs) or in an earlier boot; a process with that PID
    that started at another time than the one recorded (the PID was reused), or no process with it at all."""
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < PID_LIMIT:
        return False
    if isinstance(recorded, dict) and recorded.get("pid") == pid:  # a record of another PID is not this writer's
        if recorded.get("host") not in (None, os.uname().nodename):
            return False
        if recorded.get("boot") and boot_id() and recorded.get("boot") != boot_id():
            return False
        start = recorded.get("start")
        if isinstance(start, int) and not isinstance(start, bool) and _proc_works():
            return process_start(pid) == start
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM  # it exists, and belongs to another user
    except OverflowError:  # not reachable with the range check above; kept so no PID on disk can raise
        return False
    return True
