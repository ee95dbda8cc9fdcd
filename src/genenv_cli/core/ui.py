"""What a stage shows while it works, and what it leaves in RUN/logs/.

On a terminal: a rich progress bar with the rate (items/s, tokens/s) and the ETA. Off a terminal (CI, a
log file, a pipe): a plain line every `GENENV_PROGRESS_INTERVAL` seconds (default 10) and one at the end.
`--quiet` shows neither. Messages and progress lines go to stderr; each stage's one-line summary goes to
stdout (as JSON with `--json`), so `genenv score --json | jq .` works. Everything is also appended,
with timestamps, to `RUN/logs/<stage>.log`.

Under a launcher (accelerate launch, torchrun: RANK set) only rank 0 shows progress, prints the summary and
writes the log; the other ranks print only warnings, each prefixed with its rank, so eight processes give one
display and one log, not eight interleaved ones.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):  # nan / inf
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Tracker:
    """Counts work done; renders through a rich task or plain lines."""

    def __init__(self, ui: UI, desc: str, total: int, unit: str, rich_progress: Any = None, task: Any = None):
        self.ui, self.desc, self.total, self.unit = ui, desc, total, unit
        self.done = 0
        self.tokens = 0
        self.start = time.monotonic()
        self._last_line = self.start
        self._last_done = -1
        self._rich, self._task = rich_progress, task

    def advance(self, n: int = 1, tokens: int = 0) -> None:
        self.done += n
        self.tokens += tokens
        if self._rich is not None:
            self._rich.update(self._task, advance=n, tokens=self.tokens)
        now = time.monotonic()
        if self._rich is None and now - self._last_line >= self.ui.interval:
            self.emit()

    def emit(self) -> None:
        """A plain progress line, unless one was already printed for this count."""
        if self.done != self._last_done:
            self._last_line = time.monotonic()
            self._last_done = self.done
            self.ui._progress_line(self.line())

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.done / elapsed
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        toks = f", {self.tokens / elapsed:.0f} tok/s" if self.tokens else ""
        eta = (self.total - self.done) / rate if rate > 0 and self.total else float("nan")
        return (f"{self.desc}: {self.done}/{self.total} {self.unit}{pct}, {rate:.2f} {self.unit}/s{toks}, "
                f"elapsed {_fmt_eta(elapsed)}, ETA {_fmt_eta(eta)}")


def open_log(path: Path, root: Path | None = None) -> Any:
    """A log opened for appending without following a link: a link at the log, or at a folder between the run's
    `root` and it (`logs/` itself), a device there, or a log with other hard links (appending would change the
    file under its other names, perhaps outside the run) fails with an OSError naming it, so the log is given up
    rather than written wherever the link points."""
    import errno
    import stat

    from genenv_cli.core.errors import InputError
    from genenv_cli.core.safefiles import refuse_hard_links, refuse_links_below

    if root is not None:
        try:
            refuse_links_below(root, path, "a log")
        except InputError:
            link = next((p for p in [path, *path.parents] if p.is_symlink()), path)
            raise OSError(errno.ELOOP, f"{link} is a symbolic link; genenv does not follow links inside a run",
                          str(path)) from None
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symbolic link; genenv does not follow links inside a run", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    try:
        refuse_hard_links(fd, path, "a log")
    except InputError:
        links = os.fstat(fd).st_nlink
        os.close(fd)
        raise OSError(errno.EMLINK, f"it has {links} hard links; appending would change the file under its other "
                                    f"names too", str(path)) from None
    return os.fdopen(fd, "a", encoding="utf-8")


class UI:
    def __init__(self, *, quiet: bool = False, json_summary: bool = False, log_path: Path | None = None,
                 stream: TextIO | None = None, out: TextIO | None = None, root: Path | None = None):
        self.rank = int(os.environ.get("RANK", "0") or 0)
        if self.rank != 0:  # one log writer and one progress display per job
            quiet, json_summary, log_path = True, False, None
        self.quiet = quiet
        self.json_summary = json_summary
        self.stream = stream or sys.stderr
        self.out = out or sys.stdout
        self.log_path = log_path
        self.root = root  # the run the log belongs to: no link between it and the log is followed
        self.interval = float(os.environ.get("GENENV_PROGRESS_INTERVAL", "10"))
        self.tty = self.stream.isatty() and os.environ.get("TERM") != "dumb"

    def log(self, text: str) -> None:
        """Append to the log. A log that cannot be written (read-only storage, `logs` being a file, a full disk)
        is given up with one notice: reading a finished run must work where nothing can be written."""
        if self.log_path is None:
            return
        try:
            if self.root is None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open_log(self.log_path, self.root) as fh:
                fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
        except OSError as exc:
            path, self.log_path = self.log_path, None
            if not self.quiet:
                print(f"note: not logging to {path} ({exc.strerror or exc})", file=self.stream, flush=True)

    def info(self, text: str) -> None:
        self.log(text)
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def warn(self, text: str) -> None:
        self.log("WARNING: " + text)
        prefix = f"[rank {self.rank}] " if self.rank else ""
        print(f"{prefix}warning: {text}", file=self.stream, flush=True)

    def _progress_line(self, text: str) -> None:
        self.log(text)
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    @contextmanager
    def progress(self, desc: str, total: int, unit: str = "items"):
        if self.quiet or not self.tty:
            tracker = Tracker(self, desc, total, unit)
            try:
                yield tracker
            finally:
                tracker.emit()
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TaskProgressColumn(), TextColumn("{task.fields[rate]}"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
        with Progress(*columns, console=Console(file=self.stream), transient=False) as prog:
            task = prog.add_task(desc, total=total, rate="", tokens=0)
            tracker = Tracker(self, desc, total, unit, prog, task)
            orig = tracker.advance

            def advance(n: int = 1, tokens: int = 0) -> None:
                orig(n, tokens)
                elapsed = max(time.monotonic() - tracker.start, 1e-9)
                rate = f"{tracker.done / elapsed:.2f} {unit}/s"
                if tracker.tokens:
                    rate += f" {tracker.tokens / elapsed:.0f} tok/s"
                prog.update(task, rate=rate)

            tracker.advance = advance  # type: ignore[method-assign]
            yield tracker
        self.log(tracker.line())

    def summary(self, stage: str, epoch: int | None, fields: dict[str, Any], text: str) -> None:
        """The stage's last line: `text` for people, or JSON with --json."""
        record = {"stage": stage, "epoch": epoch, **fields}
        self.log("SUMMARY " + json.dumps(record, default=str))
        if self.json_summary:
            print(json.dumps(record, default=str), file=self.out, flush=True)
        elif not self.quiet:
            print(text, file=self.out, flush=True)


def pct(v: Any) -> str:
    """A share as a whole percentage for a summary line; "-" when not measured."""
    return "-" if v is None else f"{100 * v:.0f}%"


def num(v: Any) -> str:
    """A number with three decimals for a summary line; "-" when not measured."""
    return "-" if v is None else f"{v:.3f}"
