"""Progress a reader can trust: what a counted step has done, its rate once measured, an ETA once one can be
given, a line at least every interval off a terminal even while nothing finishes, and the last line kept in a
small file that `genenv status` shows beside a running stage.

A `Tracker` counts finished items (and tokens). Off a terminal it prints a plain line when an item finishes and
the interval has passed, and a heartbeat thread prints one whenever the interval passes with nothing finished (a
batch that takes minutes, a model that loads): the line then says how long the step has run and that no item
has finished yet. Before the first item finishes it gives no rate and no ETA (a rate measured over nothing is a
zero, and an ETA from it is infinite); the token rate is given once tokens have been counted, which the hf engine
does at every decoding step, so one long batch shows its rate before it ends. An episode's
progress (`EpisodeProgress`) also counts its turns and the episodes still live, and gives an ETA from the time
a turn takes and the turns left under the domain's cap, since finished episodes alone say nothing until the
first one ends.

The last line is also written, with the writer's pid, into `<log>.progress` beside the command's log
(`progress_file`); `read_progress` gives it back only to a reader that names the same pid, so a line left by a
finished or killed process is never shown as a running stage's.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def fmt_clock(seconds: float) -> str:
    """h:mm:ss; "?" for a time not known.

    >>> fmt_clock(3725.4), fmt_clock(float("inf"))
    ('1:02:05', '?')
    """
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "?"
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def fmt_rate(per_second: float, unit: str) -> str:
    """A rate with the digits that say something, per minute when under one a second's tenth.

    >>> fmt_rate(41.3, "tok"), fmt_rate(2.345, "gens"), fmt_rate(0.25, "rollouts"), fmt_rate(0.004, "steps")
    ('41 tok/s', '2.3 gens/s', '0.25 rollouts/s', '0.24 steps/min')
    """
    if per_second >= 0.1:
        return (f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.2g}") + f" {unit}/s"
    return f"{per_second * 60:.2g} {unit}/min"


def progress_file(log_path: Path | None) -> Path | None:
    """Where a command logging to `log_path` keeps its last progress line."""
    return None if log_path is None else log_path.with_suffix(".progress")


def write_progress(path: Path, line: str, pid: int | None = None) -> None:
    """Replace `path` with {pid, at, line}; best effort (a progress file that cannot be written is no error). Written
    to a new temporary name and renamed, so a reader never sees half a line and a link at `path` is replaced, not
    followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"pid": pid if pid is not None else os.getpid(), "at": time.time(), "line": line}, fh)
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink()


def read_progress(path: Path, pid: Any) -> tuple[str, float] | None:
    """(line, seconds since it was written) of the progress file a process `pid` wrote; None for another pid's, a
    missing file, a link or an unreadable one."""
    try:
        if path.is_symlink() or path.stat().st_size > 65536:
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or str(record.get("pid")) != str(pid) or not isinstance(record.get("line"), str):
        return None
    at = record.get("at")
    return record["line"], max(time.time() - at, 0.0) if isinstance(at, int | float) else 0.0


class Tracker:
    """Counts work done; renders through a rich task (`rich_progress`, `task`) or plain lines on `ui`.

    `ui` needs `interval` (seconds between plain lines; 0 or less: a line at every advance and no heartbeat),
    `_progress_line(text)` (print and log a line) and `_progress_note(text)` (keep it for `status`); its
    `last_line_at` (the `clock` time of the command's last line), where it has one, times the heartbeat."""

    def __init__(self, ui: Any, desc: str, total: int, unit: str, rich_progress: Any = None, task: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        self.ui, self.desc, self.total, self.unit = ui, desc, total, unit
        self.clock = clock
        self.done = 0
        self.tokens = 0
        self.start = clock()
        self._last_line = getattr(ui, "last_line_at", self.start)  # the command's last line, not this step's start
        self._last_done = -1
        self._rich, self._task = rich_progress, task
        self._note = ""
        self._eta: tuple[float, float] | None = None   # (seconds left, when it was said)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- counting
    def advance(self, n: int = 1, tokens: int = 0) -> None:
        with self._lock:
            self.done += n
            self.tokens += tokens
            if self._rich is not None:
                self._rich.update(self._task, advance=n, rate=self.rates())
            elif self.clock() - self._last_line >= self.ui.interval:
                self.emit()

    def note(self, text: str, eta: float | None = None) -> None:
        """What the count does not say (an episode's turn, the episodes live), and an ETA in seconds from now that
        replaces the one from the count's rate (None: the count's)."""
        with self._lock:
            self._note = text
            self._eta = None if eta is None else (eta, self.clock())
            if self._rich is not None:
                self._rich.update(self._task, rate=self.rates())

    # ---------------------------------------------------------------- lines
    def rates(self) -> str:
        """The measured rates ("" before anything was measured), and the note."""
        elapsed = self.clock() - self.start
        parts = []
        if self.done and elapsed > 0:
            parts.append(fmt_rate(self.done / elapsed, self.unit))
        if self.tokens and elapsed > 0:  # an engine that counts tokens as it decodes: measured inside a long batch
            parts.append(fmt_rate(self.tokens / elapsed, "tok"))
        if self._note:
            parts.append(self._note)
        return ", ".join(parts)

    def eta(self) -> float | None:
        """Seconds left, None while not known."""
        now = self.clock()
        if self._eta is not None:
            left, said = self._eta
            return max(left - (now - said), 0.0)
        elapsed = now - self.start
        if not self.total or not self.done or elapsed <= 0:
            return None
        return (self.total - self.done) * elapsed / self.done

    def line(self) -> str:
        elapsed = self.clock() - self.start
        if not self.total and not self.done:   # a step with nothing to count (a model loading)
            return f"{self.desc}: working, elapsed {fmt_clock(elapsed)}" + (f", {self._note}" if self._note else "")
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        head = f"{self.desc}: {self.done}/{self.total} {self.unit}{pct}"
        rates = self.rates()
        eta = self.eta()
        tail = f", elapsed {fmt_clock(elapsed)}"
        if eta is not None:
            tail += f", ETA {fmt_clock(eta)}"
        elif self.done < self.total:
            tail += f", no {'ETA' if self.tokens else 'rate or ETA'} until the first {self.unit} finish"
        return head + (f", {rates}" if rates else "") + tail

    def emit(self, *, heartbeat: bool = False) -> None:
        """A plain progress line, unless one was already printed for this count (a heartbeat prints it anyway: the
        elapsed time is news)."""
        with self._lock:
            if self.done == self._last_done and not heartbeat:
                return
            self._last_line = self.clock()
            self._last_done = self.done
            text = self.line()
            if self._rich is None:
                self.ui._progress_line(text)
            else:
                self.ui._progress_note(text)

    # ---------------------------------------------------------------- the heartbeat
    def start_heartbeat(self) -> None:
        """A daemon thread that emits a line whenever `ui.interval` passes without one (only the progress file on a
        terminal, where the bar shows the time itself)."""
        if self.ui.interval <= 0 or self._thread is not None:
            return

        def beat() -> None:
            while True:
                with self._lock:  # the command's last line counts too: steps that follow each other keep the beat
                    last = max(self._last_line, getattr(self.ui, "last_line_at", self._last_line))
                    wait = last + self.ui.interval - self.clock()
                if wait > 0:
                    if self._stop.wait(wait):
                        return
                    continue
                self.emit(heartbeat=True)

        self._thread = threading.Thread(target=beat, name=f"progress: {self.desc}", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


class EpisodeProgress:
    """Turns and live episodes on a tracker counting finished episodes, from the episode loop's callbacks:
    `on_turn(turn, live)` before each turn's generate call (turn 0-based), `on_done(n)` as n episodes end.
    `max_turns` is the cap on an episode's turns (the domain's `max_turns`, a benchmark's step limit): the ETA is the
    mean time of a turn so far times the turns left under it, an upper bound on the turns still to play."""

    def __init__(self, tracker: Tracker, max_turns: int):
        self.tracker, self.max_turns = tracker, max(int(max_turns), 1)
        self.first: float | None = None

    def on_turn(self, turn: int, live: int) -> None:
        now = self.tracker.clock()
        if self.first is None:
            self.first = now
        eta = None
        if turn > 0:
            per_turn = (now - self.first) / turn
            eta = per_turn * max(self.max_turns - turn, 1)
        text = f"turn {turn + 1} of at most {self.max_turns}, {live} episodes live"
        if turn > 0:
            text += f", {fmt_clock(per_turn)} a turn"
        self.tracker.note(text, eta)

    def on_done(self, n: int) -> None:
        self.tracker.advance(n, tokens=0)
