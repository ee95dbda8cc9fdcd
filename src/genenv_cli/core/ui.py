"""What a stage shows while it works, and what it leaves in RUN/logs/.

On a terminal: a rich progress bar with the rate (items/s, tokens/s) and the ETA. Off a terminal (CI, a
log file, a pipe): a plain line every `GENENV_PROGRESS_INTERVAL` seconds (default 10), whether or not an item
finished in between, and one at the end (core/progress.py says what a line claims and when). A step with nothing to
count (a model loading) prints a line every interval too (`working`).
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

from genenv_cli.core.progress import Tracker, progress_file, write_progress


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
        self.last_line_at = time.monotonic()  # when the command last printed a line (the progress heartbeat's beat)

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

    def detail(self, text: str) -> None:
        """A line for the log that a user sees only with `genenv --verbose` (internal checks, not news)."""
        from genenv_cli.core.library_noise import verbose

        self.log(text)
        if verbose() and not self.quiet:
            self.last_line_at = time.monotonic()
            print(text, file=self.stream, flush=True)

    def info(self, text: str) -> None:
        self.log(text)
        if not self.quiet:
            self.last_line_at = time.monotonic()
            print(text, file=self.stream, flush=True)

    def warn(self, text: str) -> None:
        self.log("WARNING: " + text)
        prefix = f"[rank {self.rank}] " if self.rank else ""
        self.last_line_at = time.monotonic()
        print(f"{prefix}warning: {text}", file=self.stream, flush=True)

    def _progress_line(self, text: str) -> None:
        self.log(text)
        self._progress_note(text)
        self.last_line_at = time.monotonic()
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def _progress_note(self, text: str) -> None:
        """Keep `text` as the command's last progress line, for `genenv status` (core/progress.py)."""
        path = progress_file(self.log_path)
        if path is not None:
            write_progress(path, text)

    @contextmanager
    def working(self, desc: str):
        """A step with nothing to count (a model loading or converting): off a terminal, a line every interval
        while it lasts, so a log never goes quiet for longer."""
        tracker = Tracker(self, desc, 0, "")
        tracker.start_heartbeat()
        try:
            yield tracker
        finally:
            tracker.stop_heartbeat()

    @contextmanager
    def progress(self, desc: str, total: int, unit: str = "items"):
        if self.quiet or not self.tty:
            tracker = Tracker(self, desc, total, unit)
            tracker.start_heartbeat()
            try:
                yield tracker
            finally:
                tracker.stop_heartbeat()
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
            task = prog.add_task(desc, total=total, rate="")
            tracker = Tracker(self, desc, total, unit, prog, task)
            tracker.start_heartbeat()  # on a terminal it only keeps the line for `status`: the bar shows the time
            try:
                yield tracker
            finally:
                tracker.stop_heartbeat()
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
