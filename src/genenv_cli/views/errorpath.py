"""The command line's one error path: how a command that fails ends.

Every failure a user, a disk or a model can cause ends in one paragraph on stderr (the path, what was wrong, what
to do) and exit 2 (3 for a held lock, 130 for Ctrl-C), no traceback; output cut short by its reader (`genenv status |
head -1`) ends quietly with 141, as a shell reports a command stopped by SIGPIPE; `--debug` (or GENENV_DEBUG=1) shows the
traceback instead. Anything else is a bug in genenv: one paragraph says so and where the traceback was logged,
exit 1.
"""

import contextlib
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import typer

from genenv_cli.core.errors import GenenvError, describe_os_error, disk_full, shorten_message
from genenv_cli.core.ui import open_log

DEBUG = {"on": False}  # set by the command line's --debug


class Where:
    """What the error path knows about the command so far: the run (a fallback path for messages) and its log."""

    run: Path | None = None
    log: Path | None = None


def _fail(message: str, code: int = 2) -> None:
    typer.secho(f"error: {shorten_message(message)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


# Click's own exits and usage errors pass through _errors untouched. typer >= 0.28 vendors click (its exceptions
# are typer's, not the `click` package's, and importing `click` would cost ~25 ms of start-up and a dependency
# we do not declare); ClickException is found through typer's BadParameter so that older typer works too.
_CLICK_EXITS = (typer.Exit, typer.Abort,
                next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"))


@contextmanager
def reported():
    """Every failure a user, a disk or a model can cause: one paragraph on stderr (the path, what was wrong, what
    to do) and exit 2, no traceback; `--debug` shows the traceback. Anything else is a bug in genenv: one
    paragraph saying so, the traceback in the command's log, exit 1."""
    where = Where()
    try:
        yield where
    except KeyboardInterrupt:
        typer.secho("interrupted; completed stages keep their outputs, this one left none.", err=True)
        raise typer.Exit(130) from None
    except _CLICK_EXITS:
        raise
    except BaseException as exc:
        if DEBUG["on"] or isinstance(exc, SystemExit | GeneratorExit):
            raise
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            _quit_on_closed_stdout()
        if isinstance(exc, GenenvError):
            _fail(str(exc), exc.exit_code)
        if isinstance(exc, OSError):
            _fail(describe_os_error(exc, where.run))
        if disk_full(exc):
            _fail(f"no space left on device at {where.run or Path.cwd()} ({str(exc)[:200]}). Free some space and "
                  f"rerun the command; completed stages keep their outputs.")
        if isinstance(exc, UnicodeDecodeError):
            _fail(f"a file of {where.run or 'the run'} is not UTF-8 text ({exc}). Fix or remove it and rerun.")
        if isinstance(exc, MemoryError):
            _fail("out of memory. Lower the sizes in the config (generate.tasks_per_epoch, rollout.group_size, the "
                  "batch sizes) or use a bigger machine, and rerun.")
        _report_bug(exc, where)


SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader went away (as 130 is Ctrl-C)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (`genenv status | head -1`): the broken pipe is then the
    reader's choice, not an error of the run. (Linux and macOS report POLLERR on such a pipe.)"""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, ValueError, OSError):  # no real stdout (a test's capture), or no poll
        return False


def _quit_on_closed_stdout() -> None:
    """Stop quietly with SIGPIPE_EXIT; what is still buffered for stdout goes nowhere, so the interpreter's exit
    does not fail on it a second time."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(SIGPIPE_EXIT)


def _report_bug(exc: BaseException, where: Where) -> None:
    kept = None
    if where.log is not None:
        try:
            with open_log(where.log, where.run) as fh:
                fh.write("".join(traceback.format_exception(exc)))
            kept = where.log
        except OSError:
            kept = None
    _fail(f"unexpected {type(exc).__name__}: {str(exc)[:300]}. This is a bug in genenv, not something you did; "
          f"{'the traceback is in ' + str(kept) if kept else 'rerun with --debug to see the traceback'}. Please "
          f"report it.", 1)
