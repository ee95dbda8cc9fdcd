"""Grading many (task, completion) pairs with the domain's scorer, on every core when there are many.

Scoring is pure Python (parsing completions as data), so one process is bound by one core; above
`PARALLEL_MIN` pairs the work is split over `os.cpu_count()` worker processes. On Linux they are forked, so
they inherit the tasks' payloads instead of receiving them pickled (for 125,000 tasks that pickling alone took
longer than the grading); the workers run only this module's pure-Python scoring, never polars, whose
threads are what makes forking a multi-threaded parent delicate. Elsewhere they are spawned and sent the
payloads once.

Each pair is graded under the watchdog (`watchdog.py`): a pair whose grading runs past `item_timeout_s` is
stopped and recorded as wrong (reward 0, invalid, error "timed out: ..."), and grading goes on with the next pair.
A domain's `score_many` is handed the payloads one at a time (the built-in ones take them in order), so the clock
restarts for each pair and the one that was running when it fired is known; the pairs before it are graded again
one by one (they were quick) and `score_many` goes on with the ones after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.errors import GenenvError
from genenv_cli.core.watchdog import ItemTimeout, Watchdog, reason
from genenv_cli.domains.base import TaskVerdict

PARALLEL_MIN = 20_000
CHUNK = 5_000
DEFAULT_LIMIT_S = ITEM_TIMEOUT_S

_DOMAIN: Any = None
_PAYLOADS: dict[str, Any] = {}
_LIMIT = DEFAULT_LIMIT_S


def _init(domain_name: str, payloads: dict[str, Any], limit: float = DEFAULT_LIMIT_S) -> None:
    global _DOMAIN, _PAYLOADS, _LIMIT
    from genenv_cli.catalogue.domains import stage_domain

    _DOMAIN, _PAYLOADS, _LIMIT = stage_domain(domain_name, limit), payloads, limit


def _grade(chunk: tuple[list[str], list[str]]) -> list[TaskVerdict]:
    tids, comps = chunk
    payloads = [_PAYLOADS[t] for t in tids]
    out: list[TaskVerdict | None] = [None] * len(comps)
    with Watchdog(_LIMIT) as dog:
        spans = [(0, len(comps))]  # what is left to grade
        while spans:
            lo, hi = spans.pop()
            if lo >= hi:
                continue
            taken = [0]
            try:
                scores = _DOMAIN.score_many(dog.watch(payloads[lo:hi], taken), comps[lo:hi])
                dog.disarm()
                out[lo:hi] = [_plain(s) for s in scores]
            except GenenvError:  # damaged task data (a database file a payload names): an input error, never a score
                dog.disarm()
                raise
            except ItemTimeout:
                one_by_one = range(lo, hi)
                if taken[0] < hi - lo:  # it was still taking pairs in order: the last one taken is the slow one
                    stuck = lo + max(taken[0], 1) - 1
                    out[stuck] = TaskVerdict(0.0, 0.0, False, reason(_LIMIT))
                    spans.append((stuck + 1, hi))
                    one_by_one = range(lo, stuck)
                # else every pair was taken (the last one is slow, or a plugin's score_many read them all first):
                # each is timed on its own
                out[one_by_one.start:one_by_one.stop] = [_grade_one(payloads[i], comps[i], dog) for i in one_by_one]
            except Exception:  # noqa: BLE001 - one degenerate completion must not cost the epoch's score: grade one by one
                dog.disarm()
                out[lo:hi] = [_grade_one(p, c, dog) for p, c in zip(payloads[lo:hi], comps[lo:hi], strict=True)]
    return out  # type: ignore[return-value]


def _grade_columns(chunk: tuple[list[str], list[str]]) -> Graded:
    verdicts = _grade(chunk)
    return Graded(*(list(col) for col in zip(*verdicts, strict=True))) if verdicts else Graded([], [], [], [])


def _plain(s: TaskVerdict) -> TaskVerdict:
    """A plugin's verdict as plain Python values (a numpy float, a truthy int), as the score stage stores them."""
    return TaskVerdict(float(s.reward), float(s.partial), bool(s.valid), s.error)


def _grade_one(payload: Any, completion: str, dog: Watchdog) -> TaskVerdict:
    """One pair; a scorer that raises on it (a built-in one should not; a plugin's might) makes the rollout a
    failed, invalid one whose `error` says why, as a parse error would; one that runs past the limit, too. A
    GenenvError is not the completion's fault but the data's (a damaged database or task file) and stops the stage
    with its message."""
    try:
        dog.arm()
        s = _DOMAIN.score(payload, completion)
        dog.disarm()
        return _plain(s)
    except ItemTimeout:
        return TaskVerdict(0.0, 0.0, False, reason(_LIMIT))
    except GenenvError:
        dog.disarm()
        raise
    except Exception as exc:  # noqa: BLE001 - model output is data: whatever it holds, it is a wrong answer
        dog.disarm()
        return TaskVerdict(0.0, 0.0, False,
                           f"unscorable: the scorer raised {type(exc).__name__}: {str(exc)[:200]}")


class Graded(NamedTuple):
    """The TaskVerdicts of many pairs, in order, held as columns: the score stage writes them as columns, and a
    chunk of columns is sent back from a worker process far faster than as many objects."""

    reward: list[float]
    partial: list[float]
    valid: list[bool]
    error: list[str | None]

    def verdicts(self) -> list[TaskVerdict]:
        return list(map(TaskVerdict._make, zip(self.reward, self.partial, self.valid, self.error, strict=True)))

    def extend(self, other: Graded) -> None:
        for mine, theirs in zip(self, other, strict=True):
            mine.extend(theirs)


def grade_pairs(domain_name: str, payloads: dict[str, Any], task_ids: list[str], completions: list[str],
                advance: Callable[[int], None] | None = None,
                workers: int | None = None, limit: float = DEFAULT_LIMIT_S) -> Graded:
    """The verdict on each pair, in order; a pair graded longer than `limit` seconds is wrong, its error says it
    timed out."""
    try:
        return _grade_all(domain_name, payloads, task_ids, completions, advance, workers or os.cpu_count() or 1,
                          limit)
    finally:
        # let the payloads go with the caller's data: kept in this module, they lived until interpreter exit,
        # whose final collection then walked all of them (two seconds for 125,000 tasks)
        _init_clear()


def _init_clear() -> None:
    global _DOMAIN, _PAYLOADS, _LIMIT
    _DOMAIN, _PAYLOADS, _LIMIT = None, {}, DEFAULT_LIMIT_S


def _grade_all(domain_name: str, payloads: dict[str, Any], task_ids: list[str], completions: list[str],
               advance: Callable[[int], None] | None, workers: int, limit: float) -> Graded:
    chunks = [(task_ids[i:i + CHUNK], completions[i:i + CHUNK]) for i in range(0, len(task_ids), CHUNK)]
    out = Graded([], [], [], [])
    if workers < 2 or len(task_ids) < PARALLEL_MIN:
        _init(domain_name, payloads, limit)
        for chunk in chunks:
            out.extend(_grade_columns(chunk))
            if advance:
                advance(len(chunk[0]))
        return out
    import multiprocessing as mp
    import sys

    if sys.platform == "linux":
        import gc

        _init(domain_name, payloads, limit)  # inherited by the forked workers
        # frozen objects are skipped by the workers' garbage collector, so it does not write to (and copy)
        # every page of the parent's heap
        gc.freeze()
        try:
            # a parent may have paused its collector (score does); the workers make short-lived objects
            pool = mp.get_context("fork").Pool(workers, initializer=gc.enable)
        finally:
            gc.unfreeze()
    else:
        pool = mp.get_context("spawn").Pool(workers, initializer=_init, initargs=(domain_name, payloads, limit))
    with pool:
        for part in pool.imap(_grade_columns, chunks):
            out.extend(part)
            if advance:
                advance(len(part.reward))
    return out
