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

The stages use the first layer (`stage_domain`, through `catalogue.domains.run_domains` and
`seedfiles.domains_for_run`): every call of a plugin domain (a row added at run time or an entry point; the
built-in domains are genenv's own code) and of the environments it starts is guarded, and what it returns is
checked (`plugin_values.py`). The cost is what it must be for a call made thousands of times an epoch: no
process per call, but a SIGALRM timer armed and disarmed around it (inside a watchdog that is already running, the
scorer's or the parser's per-item one, that one's limit applies and its timeout is its own) and `os._exit` replaced
for the call's duration, so that a plugin that calls it raises instead of ending the stage with status 0 (a few
microseconds; benchmarks/speed/plugin_guard_overhead.py measures them against an episode's step). An exit the guard
cannot see (a signal, `os.abort`, an `_exit` the plugin took a reference to at import) ends the process with a
non-zero status or, for an exit 0, without the manifest `genenv run` checks for.
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

from genenv_cli.core import plugin_values
from genenv_cli.core.errors import GenenvError
from genenv_cli.core.watchdog import ItemTimeout, Watchdog

GRACE_S = 5.0  # the parent's margin over the per-item limit before it stops a child that sends nothing


class PluginError(GenenvError):
    """A domain's own code failed: raised, exited, or ran past the limit."""


class Reject(Exception):  # noqa: N818 - the domain protocol's name (domains/base.py re-exports it)
    """An environment generation that is not a usable task; the message is the reason."""


class PluginExit(BaseException):  # noqa: N818 - raised in place of os._exit while plugin code runs
    """Plugin code called os._exit; raised instead, so the guard reports it."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def _exit_instead(code: Any = 0) -> None:
    raise PluginExit(code)


def describe(owner: str, function: str, exc: BaseException, limit: float) -> str:
    if isinstance(exc, PluginExit):
        return (f"{owner}: {function} ended the process (os._exit({exc.code!r})) instead of returning; a plugin's "
                f"code must return or raise an error")
    if isinstance(exc, plugin_values.BadValue):
        return f"{owner}: {function} {exc}"
    if isinstance(exc, ItemTimeout):
        return (f"{owner}: {function} did not return within {limit:g} s (score.item_timeout_s, the limit the "
                f"stages give one item)")
    if isinstance(exc, SystemExit):
        return (f"{owner}: {function} raised SystemExit({exc.code!r}); a plugin's code must return or raise an "
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
          passes: tuple[type[BaseException], ...] = (), check: Callable[[Any], Any] | None = None) -> Any:
    """`call()` under the watchdog; what it raises, but for `passes` (the domain protocol's own exceptions),
    becomes a PluginError saying whose code it was, and so does a value `check` refuses (plugin_values.BadValue).
    Inside a running watchdog (a scorer's or a parser's per-item limit) that one's limit applies and its
    ItemTimeout goes to it. A KeyboardInterrupt is the user's and passes."""
    if REPORTER.fd is not None:
        REPORTER.send(at=f"{owner}: {function}")
    outer = Watchdog.open > 0
    real_exit = os._exit
    os._exit = _exit_instead
    try:
        if outer:
            value = call()
        else:
            with Watchdog(limit) as dog:
                dog.arm()
                try:
                    value = call()
                finally:
                    dog.disarm()
        return check(value) if check is not None else value
    except (KeyboardInterrupt, PluginError):
        raise
    except passes:
        raise
    except ItemTimeout:
        if outer:
            raise
        raise PluginError(describe(owner, function, ItemTimeout(), limit)) from None
    except BaseException as exc:  # noqa: BLE001 - the plugin's, reported as its own (SystemExit included)
        raise PluginError(describe(owner, function, exc, limit)) from None
    finally:
        os._exit = real_exit


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


# what a domain's methods may raise in a stage and the stage handles itself: a rejected generation, a parser
# choking on degenerate model text (a rejected generation), a scorer failing on a completion (an unscorable, wrong
# answer: model output is data), a method the domain does not declare, an input error naming a damaged file
_REJECTS = (Reject, ValueError, RecursionError, OverflowError)
_METHODS: dict[str, tuple[tuple[type[BaseException], ...], Callable[..., Any] | None]] = {
    "parse_env_output": (_REJECTS, plugin_values.parsed_task),
    "score": ((Exception,), plugin_values.verdict),
    "agent_messages": ((), plugin_values.messages),
    "env_messages": ((), plugin_values.messages),
    "check_payload": ((), plugin_values.payload_problem),
    "seeds": ((), plugin_values.seed_tasks),
    "read_seeds": ((), plugin_values.seed_tasks),
}
_ALWAYS = (Reject, NotImplementedError, GenenvError)
# what reads a plugin's data rather than handles one item (its import, its seed files, their fingerprint): the
# per-item limit would stop a plugin that is only large, so these get at least LOAD_LIMIT_S
LOAD_LIMIT_S = 600.0
_LOADING = {"seeds", "read_seeds", "seed_files", "shared_seed_files", "data_fingerprint", "code_files"}


class StageDomain(GuardedDomain):
    """A plugin domain as the stages call it: each method guarded with the per-item limit, its value checked
    (`plugin_values`), and every environment it starts guarded step by step (`GuardedEnvironment`)."""

    def __init__(self, dom: Any, owner: str, limit: float):
        super().__init__(dom, owner, limit, _ALWAYS)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if not callable(value) or name.startswith("_"):
            return value
        passes, check = _METHODS.get(name, ((), None))
        limit = max(self.limit, LOAD_LIMIT_S) if name in _LOADING else self.limit
        return lambda *a, **kw: guard(self.owner, f"{name}()", lambda: value(*a, **kw), limit, _ALWAYS + passes,
                                      check)

    def score_many(self, payloads: Any, completions: list[str]) -> list[Any]:
        n = len(completions)
        return guard(self.owner, "score_many()", lambda: self.wrapped.score_many(payloads, completions), self.limit,
                     (Exception,), lambda v: plugin_values.verdicts(v, n))

    def environment(self, payload: Any) -> GuardedEnvironment:
        env = guard(self.owner, "environment()", lambda: self.wrapped.environment(payload), self.limit, _ALWAYS)
        return GuardedEnvironment(env, self.owner, self.limit)

    def start_episode(self, payload: Any, threshold: float = 1.0) -> Any:
        """The wrapped domain's episode (its first observation checked), stepped through a guarded environment."""
        episode = guard(self.owner, "start_episode()", lambda: self.wrapped.start_episode(payload, threshold),
                        self.limit, _ALWAYS)
        env = getattr(episode, "env", None)
        if env is None or not hasattr(env, "step"):
            raise PluginError(f"{self.owner}: start_episode() returned {type(episode).__name__}, not an episode of "
                              f"an environment (domains/base.py, DomainEpisode)")
        guard(self.owner, "first_messages()", lambda: [dict(m) for m in episode.messages], self.limit, (),
              plugin_values.messages)
        episode.env = GuardedEnvironment(env, self.owner, self.limit)
        return episode


class GuardedEnvironment:
    """One episode's environment with `step`, `first_messages` and `close` guarded (the per-item limit per
    step) and their values checked; `domain` and `payload` pass through."""

    def __init__(self, env: Any, owner: str, limit: float):
        self.wrapped, self.owner, self.limit = env, owner, limit
        self.domain, self.payload = getattr(env, "domain", None), getattr(env, "payload", None)

    def first_messages(self) -> Any:
        return guard(self.owner, "first_messages()", self.wrapped.first_messages, self.limit, (),
                     plugin_values.messages)

    def step(self, action: str) -> Any:
        return guard(self.owner, "step()", lambda: self.wrapped.step(action), self.limit, (), plugin_values.step)

    def close(self) -> None:
        guard(self.owner, "close()", self.wrapped.close, self.limit)


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
