"""A domain's code under a guard, for the commands that look at domains (`genenv domains`, `domains check`,
`domains preview`): a plugin's bug is reported as the plugin's, and one that hangs, exits or kills its process
never hangs the command, passes silently or hides the other plugins.

Two layers:

- `GuardedDomain` wraps a domain: each of its methods runs under the watchdog with the stages' per-item limit
  (`score.item_timeout_s`, `watchdog.py`), and what it raises besides the domain protocol's own exceptions
  (`Reject`, `NotImplementedError`: the caller names them) becomes a `PluginError` naming the domain, the method and the message. A
  `SystemExit` is one of those: a domain's code has no business ending the command.
- `isolated` runs the command's work in a forked child process that sends its output and, before each domain
  call, what it is about to call, back over a pipe. When the child ends without finishing (`os._exit`, a signal)
  or stops sending for longer than the limit (a hang in C code the watchdog cannot interrupt), the parent names
  the call that was running. Where there is no fork (not POSIX), the work runs in this process under the first
  layer alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from genenv_cli.core.errors import GenenvError
from genenv_cli.core.watchdog import ItemTimeout, Watchdog

GRACE_S = 5.0  # the parent's margin over the per-item limit before it stops a child that sends nothing


class PluginError(GenenvError):
    """A domain's own code failed: raised, exited, or ran past the limit."""


def describe(owner: str, function: str, exc: BaseException, limit: float) -> str:
    if isinstance(exc, ItemTimeout):
        return (f"{owner}: {function} did not return within {limit:g} s (score.item_timeout_s, the limit the "
                f"stages give one item)")
    if isinstance(exc, SystemExit):
        return (f"{owner}: {function} raised SystemExit({exc.code!r}); a domain's code must return or raise an "
                f"error, never end the process")
    text = str(exc).strip()
    return f"{owner}: {function} raised {type(exc).__name__}" + (f": {text[:400]}" if text else "")


class Reporter:
    """Where the child says what it is about to call (the parent names it if the child dies there)."""

    def __init__(self) -> None:
        self.fd: int | None = None

    def send(self, **message: Any) -> None:
        if self.fd is not None:
            data = (json.dumps(message) + "\n").encode("utf-8")
            while data:
                data = data[os.write(self.fd, data):]


REPORTER = Reporter()


def guard(owner: str, function: str, call: Callable[[], Any], limit: float,
          passes: tuple[type[BaseException], ...] = ()) -> Any:
    """`call()` under the watchdog; what it raises, but for `passes` (the domain protocol's own exceptions),
    becomes a PluginError saying whose code it was."""
    REPORTER.send(at=f"{owner}: {function}")
    with Watchdog(limit) as dog:
        dog.arm()
        try:
            return call()
        except passes:
            raise
        except (Exception, SystemExit, ItemTimeout) as exc:  # noqa: BLE001 - the plugin's, reported as its own
            raise PluginError(describe(owner, function, exc, limit)) from None
        finally:
            dog.disarm()


class GuardedDomain:
    """A domain whose every method call is `guard`ed; other attributes (its shapes, its suite) pass through.
    `wrapped` is the domain itself, for `isinstance` and for naming its class."""

    def __init__(self, dom: Any, owner: str, limit: float, passes: tuple[type[BaseException], ...]):
        self.wrapped, self.owner, self.limit, self.passes = dom, owner, limit, passes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if not callable(value) or name.startswith("_"):
            return value
        return lambda *a, **kw: guard(self.owner, f"{name}()", lambda: value(*a, **kw), self.limit, self.passes)


class _Stream:
    """The child's stdout or stderr: every write goes to the parent as it happens."""

    def __init__(self, key: str):
        self.key = key

    def write(self, text: str) -> int:
        REPORTER.send(**{self.key: text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def isolated(work: Callable[[], int], limit: float) -> tuple[int | None, str | None, str]:
    """Run `work()` (which prints and returns an exit status) in a forked child. Returns (its status, None, "")
    when it finished; else (None, the call that was running when it ended, how it ended)."""
    if not hasattr(os, "fork"):
        return work(), None, ""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 70
        try:
            os.close(read_fd)
            REPORTER.fd = write_fd
            sys.stdout, sys.stderr = _Stream("out"), _Stream("err")
            status = work()
            REPORTER.send(done=status)
        except BaseException as exc:  # noqa: BLE001 - the parent reports it; nothing may unwind into pytest or typer
            with contextlib.suppress(BaseException):
                REPORTER.send(error=str(exc) if isinstance(exc, GenenvError) else
                              f"{type(exc).__name__}: {str(exc)[:400]}", code=getattr(exc, "exit_code", 1))
        finally:
            os._exit(status if isinstance(status, int) else 70)
    os.close(write_fd)
    return _follow(pid, read_fd, limit)


def _follow(pid: int, fd: int, limit: float) -> tuple[int | None, str | None, str]:
    at: str | None = None
    buf = b""
    result: tuple[int | None, str | None, str] | None = None
    raised: _Raised | None = None
    last = time.monotonic()
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], 0.5)
            if not ready:
                if time.monotonic() - last > limit + GRACE_S:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return None, at, f"did not return within {limit:g} s (score.item_timeout_s) and was stopped"
                continue
            chunk = pipe.read(1 << 16)
            if not chunk:
                break
            last = time.monotonic()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if "out" in msg:
                    sys.stdout.write(msg["out"])
                elif "err" in msg:
                    sys.stderr.write(msg["err"])
                elif "at" in msg:
                    at = msg["at"]
                elif "done" in msg:
                    result = (msg["done"], None, "")
                elif "error" in msg:
                    raised = _Raised(msg["error"], msg.get("code", 1))
    _, status = os.waitpid(pid, 0)
    if raised is not None:
        raise raised
    if result is not None:
        return result
    if os.WIFSIGNALED(status):
        return None, at, f"ended the process with signal {signal.Signals(os.WTERMSIG(status)).name}"
    return None, at, f"ended the process (exit status {os.WEXITSTATUS(status)}) instead of returning"


class _Raised(GenenvError):
    """An error the child's work raised, raised again in the parent with the child's exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code
