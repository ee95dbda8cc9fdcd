"""Grading many (task, completion) pairs with the domain's scorer, on every core when there are many.

Scoring is pure Python (parsing completions as data), so one process is bound by one core; above
`PARALLEL_MIN` pairs the work is split over `os.cpu_count()` worker processes. On Linux they are forked, so
they inherit the tasks' payloads instead of receiving them pickled (for 125,000 tasks that pickling alone took
longer than the grading); the workers run only this module's pure-Python scoring, never polars, whose
threads are what makes forking a multi-threaded parent delicate. Elsewhere they are spawned and sent the
payloads once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from genenv_cli.errors import GenenvError

PARALLEL_MIN = 20_000
CHUNK = 5_000

_DOMAIN: Any = None
_PAYLOADS: dict[str, Any] = {}


def _init(domain_name: str, payloads: dict[str, Any]) -> None:
    global _DOMAIN, _PAYLOADS
    from genenv_cli.domains import get_domain

    _DOMAIN, _PAYLOADS = get_domain(domain_name), payloads


def _grade(chunk: tuple[list[str], list[str]]) -> list[tuple[float, float, bool, str | None]]:
    tids, comps = chunk
    payloads = [_PAYLOADS[t] for t in tids]
    try:
        scores = _DOMAIN.score_many(payloads, comps)
    except GenenvError:  # damaged task data (a database file a payload names): an input error, never a score
        raise
    except Exception:  # noqa: BLE001 - one degenerate completion must not cost the epoch's score: grade one by one
        return [_grade_one(p, c) for p, c in zip(payloads, comps, strict=True)]
    return [(float(s.reward), float(s.partial), bool(s.valid), s.error) for s in scores]


def _grade_one(payload: Any, completion: str) -> tuple[float, float, bool, str | None]:
    """One pair; a scorer that raises on it (a built-in one should not; a plugin's might) makes the rollout a
    failed, invalid one whose `error` says why, as a parse error would. A GenenvError is not the completion's
    fault but the data's (a damaged database or task file) and stops the stage with its message."""
    try:
        s = _DOMAIN.score(payload, completion)
        return float(s.reward), float(s.partial), bool(s.valid), s.error
    except GenenvError:
        raise
    except Exception as exc:  # noqa: BLE001 - model output is data: whatever it holds, it is a wrong answer
        return 0.0, 0.0, False, f"unscorable: the scorer raised {type(exc).__name__}: {str(exc)[:200]}"


def grade_pairs(domain_name: str, payloads: dict[str, Any], task_ids: list[str], completions: list[str],
                advance: Callable[[int], None] | None = None,
                workers: int | None = None) -> list[tuple[float, float, bool, str | None]]:
    """(reward, partial, valid, error) for each pair, in order."""
    try:
        return _grade_all(domain_name, payloads, task_ids, completions, advance, workers or os.cpu_count() or 1)
    finally:
        # let the payloads go with the caller's data: kept in this module, they lived until interpreter exit,
        # whose final collection then walked all of them (two seconds for 125,000 tasks)
        _init_clear()


def _init_clear() -> None:
    global _DOMAIN, _PAYLOADS
    _DOMAIN, _PAYLOADS = None, {}


def _grade_all(domain_name: str, payloads: dict[str, Any], task_ids: list[str], completions: list[str],
               advance: Callable[[int], None] | None, workers: int) -> list[tuple[float, float, bool, str | None]]:
    chunks = [(task_ids[i:i + CHUNK], completions[i:i + CHUNK]) for i in range(0, len(task_ids), CHUNK)]
    out: list[tuple[float, float, bool, str | None]] = []
    if workers < 2 or len(task_ids) < PARALLEL_MIN:
        _init(domain_name, payloads)
        for chunk in chunks:
            out.extend(_grade(chunk))
            if advance:
                advance(len(chunk[0]))
        return out
    import multiprocessing as mp
    import sys

    if sys.platform == "linux":
        import gc

        _init(domain_name, payloads)  # inherited by the forked workers
        # frozen objects are skipped by the workers' garbage collector, so it does not write to (and copy)
        # every page of the parent's heap
        gc.freeze()
        try:
            # a parent may have paused its collector (score does); the workers make short-lived objects
            pool = mp.get_context("fork").Pool(workers, initializer=gc.enable)
        finally:
            gc.unfreeze()
    else:
        pool = mp.get_context("spawn").Pool(workers, initializer=_init, initargs=(domain_name, payloads))
    with pool:
        for part in pool.imap(_grade, chunks):
            out.extend(part)
            if advance:
                advance(len(part))
    return out
