"""User-level locations: the cache (converted embedded model, downloaded benchmark data)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$GENENV_CACHE, else $XDG_CACHE_HOME/genenv, else ~/.cache/genenv."""
    env = os.environ.get("GENENV_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "genenv"
