"""Size caps on the files a stage reads before its work starts (seed files and folders, a run's JSON lines files),
checked in one pass over the bytes, so that reading a hostile file costs time linear in its size and bounded.

`scan_file` reads a file in chunks and finds its longest line with bytes methods (C loops: about a second for the
largest file a cap allows); `scan_source` does it for a file or every file of a folder (a linked folder is refused).
`json_lines` (jsonio.py) takes the same `Caps` and refuses a line past the cap as it reads it, never holding more
than the cap in memory. The caps are far above what the benchmarks' own files need (docs/domains.md, "Size caps on
seed files", gives the figures) and fixed: a file past one is not a seed file genenv can use.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from genenv_cli.core.errors import InputError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Caps:
    what: str                 # what the file is, in a message: "seed file" (read "a seed file")
    line: int                 # bytes of one line (a JSON lines record, a CSV row, a one-line JSON document)
    file: int | None = None   # bytes of one file
    folder: int | None = None  # bytes of all files of a folder
    files: int | None = None  # files in a folder
    doc: str = "docs/domains.md, \"Size caps on seed files\""


SEEDS = Caps("seed file", line=32 << 20, file=512 << 20, folder=4 << 30, files=100_000)
DATA = Caps("benchmark data file", line=SEEDS.line, file=SEEDS.file, folder=SEEDS.folder, files=SEEDS.files)
RUN_FILES = Caps("run's JSON lines file", line=64 << 20, doc="docs/pools.md")


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def line_too_long(path: Path | str, lineno: int, caps: Caps, expected: str = "") -> InputError:
    tail = f"; expected {expected}" if expected else ""
    return InputError(f"{path}, line {lineno}: the line is longer than {size_text(caps.line)}, the most a {caps.what} "
                      f"may hold in one line (one record; a fixed cap, {caps.doc}){tail}.")


def file_too_large(path: Path | str, size: int, caps: Caps) -> InputError:
    assert caps.file is not None
    return InputError(f"{path}: {size:,} bytes, past {size_text(caps.file)}, the most a {caps.what} may hold (a fixed "
                      f"cap, {caps.doc}); split it into several files.")


def scan_file(path: Path, caps: Caps, fd: int | None = None) -> int:
    """InputError when the regular file at `path` is larger than `caps.file` or has a line longer than `caps.line`;
    else its size. Lines between two newlines of one chunk are shorter than the chunk, so only a line's run across
    chunks needs counting."""
    from genenv_cli.core.safefiles import open_regular

    own = fd is None
    fd = open_regular(path) if fd is None else fd
    try:
        size = os.fstat(fd).st_size
        if caps.file is not None and size > caps.file:
            raise file_too_large(path, size, caps)
        run = lines = 0  # bytes of the line read so far; newlines before it
        while chunk := os.read(fd, max(_CHUNK, caps.line // 8)):
            first = chunk.find(b"\n")
            if first < 0:
                run += len(chunk)
            else:
                run += first
                if run > caps.line:
                    break
                lines += chunk.count(b"\n")
                run = len(chunk) - chunk.rfind(b"\n") - 1
            if run > caps.line:
                break
        if run > caps.line:
            raise line_too_long(path, lines + 1, caps)
        return size
    finally:
        if own:
            os.close(fd)


def scan_source(path: Path, caps: Caps, option: str = "--seeds") -> None:
    """`scan_file` for a file; for a folder, every file below it (a linked file is read where it points; a linked
    folder is refused), the folder's count and total size checked first, from the listing alone. `option` names
    the command's option in messages."""
    if not path.is_dir():
        scan_file(path, caps)
        return
    files: list[Path] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):  # os.walk never descends into a linked folder
        for name in sorted(dirnames + filenames):
            here = Path(dirpath) / name
            if stat.S_ISDIR(os.lstat(here).st_mode):
                continue
            if here.is_symlink() and here.is_dir():
                raise InputError(f"{option} {path}: {here} is a symbolic link to a folder; the size caps are checked "
                                 f"without following linked folders (copy the folder in instead).")
            files.append(here)
            total += here.stat().st_size if here.exists() else 0
            if caps.files is not None and len(files) > caps.files:
                raise InputError(f"{option} {path}: more than {caps.files:,} files, the most a folder of {caps.what}s "
                                 f"may hold (a fixed cap, {caps.doc}); import it in parts.")
            if caps.folder is not None and total > caps.folder:
                raise InputError(f"{option} {path}: its files hold more than {size_text(caps.folder)}, the most a "
                                 f"folder of {caps.what}s may hold (a fixed cap, {caps.doc}); import it in parts.")
    for here in files:
        if here.exists():  # a dangling link is the domain's reader's to name
            scan_file(here, caps)
