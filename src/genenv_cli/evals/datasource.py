"""Fetching a benchmark's official files once and caching them, and the error when none can be had.

Loaders call `try_download(url, cache_dir / bench / version / name, tried)`: the file is downloaded to a
temporary name and renamed into place, so a broken download never leaves a half file in the cache; the
URL and the sha256 are recorded beside it (`<name>.source.json`) so results can name the data version.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import open_regular

CSV_FIELD_DEFAULT = 131_072  # the csv module's own default field size limit


@contextlib.contextmanager
def csv_field_limit(limit: int):
    """The csv module's field size limit is one setting for the whole process: a reader that needs another sets it
    for its own read and puts the previous one back, so no reader's rule depends on which ran before it."""
    before = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def sha256_paths(paths: list[Path]) -> str:
    """One fingerprint over several data files (each file's name and bytes, in sorted order)."""
    h = hashlib.sha256()
    for p in sorted(paths, key=lambda q: str(q)):
        h.update(p.name.encode() + b"\0")
        with os.fdopen(open_regular(p), "rb") as fh:  # never a device or a pipe: /dev/zero never ends
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def no_data_error(bench: str, sources: list[str], tried: list[str]) -> InputError:
    lines = "; ".join(sources)
    why = "; ".join(tried) if tried else "nothing was found"
    return InputError(f"no {bench} data available ({why}). Sources: {lines}. Download the official files "
                      f"and pass them with --data PATH.")


def cached_download(url: str, dest: Path, timeout: float = 60.0) -> Path:
    """`dest` if already cached, else download `url` there. Raises OSError/URLError on network failure."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:  # noqa: S310
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        os.replace(tmp, dest)
        dest.with_name(dest.name + ".source.json").write_text(json.dumps({"url": url, "sha256": digest}) + "\n")
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def try_download(url: str, dest: Path, tried: list[str]) -> Path | None:
    """cached_download, recording a failure in `tried` instead of raising. With GENENV_OFFLINE=1 only the cache
    is looked at."""
    if os.environ.get("GENENV_OFFLINE") == "1" and not dest.exists():
        tried.append(f"{url}: not downloaded (GENENV_OFFLINE=1)")
        return None
    try:
        return cached_download(url, dest)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        tried.append(f"{url}: {getattr(exc, 'reason', exc)}")
        return None
