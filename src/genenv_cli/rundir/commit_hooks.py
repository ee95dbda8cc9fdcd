"""What follows a stage's commit, subscribed from the floors above the contract, which imports none of them.

The contract (contract.py) commits a stage's outputs and manifest; the modules that act on a commit register
themselves here when they are imported, and the stage modules import them (`stages.*`: the line that imports
`metrics` and `trackers`):

- `DERIVED`: `(run, cfg, epoch, stage, manifest) -> {path: bytes}`, files computed from the epoch's manifests
  (`manifest`, about to be committed, in place of the stage's own; None: the manifests as they are). They are
  committed with the stage's outputs, recovered with them, and rewritten by a no-op run when they no longer match
  (metrics.py: the epoch's metrics.json);
- `BEFORE`: `(cfg, what)`, called before a stage does any work; raising stops it (trackers/: a tracker named but
  not installed);
- `AFTER`: `(run, cfg)`, called under the epoch's lock once a stage is committed or found up to date (trackers/:
  send each tracker the points it lacks; it warns rather than raises, the stage having committed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

DERIVED: list[Callable[..., dict[Path, bytes]]] = []
BEFORE: list[Callable[[Any, str], None]] = []
AFTER: list[Callable[[Any, Any], Any]] = []


def subscribe(hooks: list[Callable[..., Any]], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add `fn` to `hooks` once (a module imported twice, or reloaded by name, registers one function)."""
    key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
    hooks[:] = [h for h in hooks if (getattr(h, "__module__", None), getattr(h, "__qualname__", None)) != key]
    hooks.append(fn)
    return fn
