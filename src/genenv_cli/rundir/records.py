"""Reading the small JSON files a run records: leniently (a lock's holder, a manifest for `status`) or strictly,
naming the file and what was expected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import GenenvError, InputError
from genenv_cli.core.safefiles import RECORD_MAX, read_regular


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


