"""Fingerprints of a run's files and folders: size, modification time and sha256, and whether a file is still the
one a manifest recorded (cheap when size and time agree)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from genenv_cli.core.safefiles import open_regular


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


