"""A time limit per item of model-text handling, so that one completion can never stall a stage.

Every built-in parser of model text reads in linear time and bounded size (a megabyte of adversarial text parses
well under a second; tests/robustness/test_parser_bounds.py asserts it). The watchdog is the net under them, for
what no test foresaw and for plugin domains and benchmarks: `score` grades each (task, completion) pair, `evaluate`
scores each sample and `generate-tasks` parses each environment generation under a limit of `score.item_timeout_s` seconds
(wall clock). An item over the limit is stopped and counted as wrong: score records reward 0, invalid, with
`error` = "timed out: ..." in scores.parquet; evaluate records the sample as incorrect with that reason; generate-tasks
rejects the generation as a parse failure with that reason. The stage goes on with the next item.

How: a real-time interval timer (`setitimer(ITIMER_REAL)`) is armed as each item starts and disarmed when it ends;
when it fires, its SIGALRM handler raises `ItemTimeout` in the code that is running. Python runs signal handlers
between bytecodes, and its regular-expression engine checks for signals while it matches, so both a Python loop and
a backtracking regex are stopped. A thread cannot be stopped from outside in Python (and a stuck regex would keep
the GIL from the thread watching it), and a process per item costs more than grading it, hence a signal.
`ItemTimeout` derives from BaseException so that a scorer's own `except Exception` does not swallow it.

Limits, by design:
- Code in a C extension that neither returns nor checks for signals (a third-party library's long computation) is
  stopped only when it returns to Python; the item is then recorded as timed out, late.
- Signals reach the main thread only, and `setitimer` is POSIX: in a thread other than the main one, or on Windows,
  the watchdog is off (`Watchdog.active` is False) and only the parsers' own bounds apply.
- An item is interrupted wherever it is: a scorer that kept state between items could be left half-updated. The
  built-in scorers keep none but caches (`functools.cache`, `cached_property`), which store a value only once it
  is computed whole.
- A built-in domain's episode steps are not timed; a plugin's are, each under the plugin guard (plugin_guard.py),
  which arms this watchdog around every call of plugin code that no watchdog already times.
- A timer someone else had armed (pytest-timeout's, for one) is put back when the watchdog ends, less the time
  spent; its handler is restored too.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

SETTING = "score.item_timeout_s"


class ItemTimeout(BaseException):  # noqa: N818 - a BaseException like KeyboardInterrupt, not an error class
    """Raised inside an item's parsing or scoring when it runs past the watchdog's limit."""


def reason(seconds: float) -> str:
    """What a timed-out item records as its error."""
    return f"timed out: parsing and scoring took longer than {seconds:g} s ({SETTING})"


class Watchdog:
    """`with Watchdog(seconds) as dog:` then `dog.arm()` as each item starts (or iterate `dog.watch(items)`,
    which arms as it hands out each item) and `dog.disarm()` when the work is done. `ItemTimeout` is raised in
    the running code when an armed item passes `seconds`. `Watchdog.open` counts the active watchdogs entered and
    not yet left: code inside one (the plugin guard) leaves the limit to it."""

    open = 0

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.active = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        self._armed = False
        self._prev_handler: Any = None
        self._prev_timer: tuple[float, float] = (0.0, 0.0)
        self._entered = 0.0

    def _fire(self, signum: int, frame: Any) -> None:
        if self._armed:  # a signal already on its way when the item ended is dropped
            self._armed = False
            raise ItemTimeout(reason(self.seconds))

    def __enter__(self) -> Watchdog:
        if self.active:
            self._entered = time.monotonic()
            self._prev_timer = signal.setitimer(signal.ITIMER_REAL, 0)
            self._prev_handler = signal.signal(signal.SIGALRM, self._fire)
            Watchdog.open += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        Watchdog.open -= 1
        self.disarm()
        signal.signal(signal.SIGALRM, self._prev_handler if self._prev_handler is not None else signal.SIG_DFL)
        left, interval = self._prev_timer
        if left > 0:  # someone else's timer: put back what is left of it (at once if its time has passed)
            signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - self._entered), 1e-3), interval)

    def arm(self) -> None:
        """Start the clock for one item (restarting it if an item was armed)."""
        if self.active:
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def disarm(self) -> None:
        if self.active and self._armed:
            self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)

    def watch(self, items: Iterable[Any], taken: list[int] | None = None) -> Iterator[Any]:
        """The items, each handed out with the clock restarted for it; `taken[0]` counts those handed out (so
        the caller knows which item was running when ItemTimeout came)."""
        for item in items:
            if taken is not None:
                taken[0] += 1
            self.arm()
            yield item
