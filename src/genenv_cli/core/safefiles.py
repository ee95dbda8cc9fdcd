"""Opening files without following links or reading devices: the primitives under every read and write of a run.

A run directory is trusted to its owner, but what is found in it is data: a symbolic link planted at an output
would send a write anywhere, and a device or a pipe (`/dev/zero`, a FIFO) at an input would never end or block.
Every file genenv reads inside a run is opened here as a regular file, and every file it creates is created
afresh without following a link. These functions take a path and know nothing of a run's layout (that is
`rundir`'s).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError

RECORD_MAX = 1 << 20  # a lock's record or a leniently read file: anything longer is not one genenv wrote


def link_refusal(path: Path, what: str = "a file genenv writes") -> InputError:
    return InputError(f"{path} is a symbolic link, where the run keeps {what}. genenv does not follow links inside a "
                      f"run directory (it would write to wherever the link points); remove the link "
                      f"(`rm {path}`) and rerun. To keep a run on another disk, link or mount the run directory "
                      f"itself.")


def refuse_link(path: Path, what: str = "a file genenv writes") -> None:
    """InputError when `path` itself is a symbolic link (dangling or not)."""
    if path.is_symlink():
        raise link_refusal(path, what)


def hard_link_refusal(path: Path, links: int, what: str = "a file genenv writes") -> InputError:
    return InputError(f"{path} has {links} hard links (other names for the same file, perhaps outside the run), "
                      f"where the run keeps {what}. genenv changes that file in place, which would change it under "
                      f"every other name too; remove this name (`rm {path}`: the other names keep their content) "
                      f"and rerun.")


def refuse_hard_links(fd: int, path: Path, what: str = "a file genenv writes") -> None:
    """InputError when the open file `fd` (at `path`) is a regular file with more than one name: for files genenv
    changes in place (a lock's record, an appended log), never for files it creates afresh and renames."""
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise hard_link_refusal(path, st.st_nlink, what)


def refuse_links_below(root: Path, path: Path, what: str = "a file genenv writes") -> None:
    """InputError when `path` or any folder between the run's root and it, at any depth, is a symbolic link, or
    when the path climbs out with `..`: what genenv writes stays inside the run. A path outside `root` is not
    this function's to judge (a report written where `--out` says)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return
    if ".." in parts:
        raise InputError(f"{path}: climbs out of the run directory {root} with '..', where the run keeps {what}; "
                         f"genenv writes only inside the run.")
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            raise link_refusal(here, what if here == path else "a folder of the run")


def refuse_links_leaving(root: Path, folder: Path, what: str) -> None:
    """InputError when a symbolic link anywhere under `folder` (a folder a library writes into, files and subfolders
    of its own choosing: W&B's) leads outside `root`. Links that stay inside (W&B's own `latest-run`) are left."""
    real_root = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(folder):  # never descends into a linked folder
        for name in dirnames + filenames:
            here = os.path.join(dirpath, name)
            if os.path.islink(here):
                target = os.path.realpath(here)
                if target != real_root and not target.startswith(real_root.rstrip(os.sep) + os.sep):
                    raise link_refusal(Path(here), what)


def refuse_overlap(out: Path, root: Path, option: str, what: str, allowed: Path | None = None) -> None:
    """InputError when `out` (a command's `--out`) is the folder `root` (a run), inside it or contains it, wherever
    links lead and whatever `--force` says: a write there, or the replacement of `out`, would overwrite or delete
    the run's own files. `allowed`: a folder inside `root` where the command may write (the report's own)."""
    real_out, real_root = Path(os.path.realpath(out)), Path(os.path.realpath(root))
    if allowed is not None and (real_out == Path(os.path.realpath(allowed))
                                or Path(os.path.realpath(allowed)) in real_out.parents):
        return
    if real_out == real_root or real_root in real_out.parents:
        where = "is the run directory" if real_out == real_root else f"is inside the run directory {root}"
        raise InputError(f"{option} {out} {where}: {what} would overwrite the run's own files (its epochs, "
                         f"checkpoints, pools or logs). Choose a folder outside the run.")
    if real_out in real_root.parents:
        raise InputError(f"{option} {out} contains the run directory {root}: replacing it with {what} would delete "
                         f"the run. Choose a folder outside the run.")


def open_regular(path: Path, *, follow: bool = True) -> int:
    """A read-only descriptor of a regular file. A device, FIFO or socket (`/dev/zero`, a pipe) is refused with an
    InputError naming it: reading one never ends or blocks. `follow=False` also refuses a symbolic link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise link_refusal(path, "a file genenv reads") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
        raise InputError(f"{path} is {kind}, not a regular file; genenv reads only regular files there. Move it "
                         f"aside and rerun.")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: Path, *, limit: int | None = None, follow: bool = True) -> bytes:
    """The bytes of a regular file (see `open_regular`); at most `limit` bytes, when given."""
    with os.fdopen(open_regular(path, follow=follow), "rb") as fh:
        return fh.read() if limit is None else fh.read(limit)


def open_new(path: Path, mode: str = "wb", **kw: Any) -> Any:
    """Create `path` for writing without following a symbolic link: a leftover (a killed writer's file with this
    process's id, or a link planted there) is removed first, then the file is created exclusively."""
    remove_entry(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, mode, **kw)


def remove_entry(path: Path) -> None:
    """Remove whatever is at `path` without following it: a link is unlinked (its target untouched), a folder
    removed with its contents, a missing entry ignored."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
