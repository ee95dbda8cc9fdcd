"""Errors a user can act on. The CLI prints their message as one paragraph and exits non-zero.

Everything a user, a disk or a model can cause ends here: genenv's own errors carry their message; the
operating system's (a full disk, a read-only folder, a file where a folder belongs) are described by
`describe_os_error` with the path and what to do. `--debug` (or GENENV_DEBUG=1) shows the traceback instead.
"""

import errno


class GenenvError(Exception):
    """Base class: the message names the file, the line and what was expected."""

    exit_code = 2


class ConfigError(GenenvError):
    """The run config, or a --set override, is invalid."""


class InputError(GenenvError):
    """A stage input is missing, malformed or of the wrong schema."""


class LockError(GenenvError):
    """Another process holds this epoch's lock."""

    exit_code = 3


class ModelError(GenenvError):
    """A model could not be resolved or loaded."""


class RegistryError(GenenvError):
    """An unknown domain or benchmark name."""


class DiskError(GenenvError):
    """The disk filled up (or a quota was reached) while a stage wrote its outputs."""


def disk_full(exc: BaseException) -> bool:
    """True for a full disk or quota, however the library that wrote reported it (polars and safetensors raise
    their own exception types with the operating system's text)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "os error 28" in text or "Disk quota exceeded" in text


def describe_os_error(exc: OSError, fallback: object = None) -> str:
    """One paragraph for an operating-system error: the path, what was wrong, what to do."""
    path = exc.filename if exc.filename is not None else fallback
    where = elide(str(path), 400) if path is not None else "a file of the run"
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on device" if code == errno.ENOSPC else "disk quota exceeded"
        return (f"{what} at {where}. Free some space (or move the run to a bigger disk) and rerun the command; "
                f"completed stages keep their outputs.")
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"{where}: cannot write here ({exc.strerror}). Reading a finished run works on read-only storage "
                f"(`genenv status`, `genenv report --out FILE`, `genenv evaluate`); to run a stage, copy the run to "
                f"a writable place or fix the permissions.")
    if code == errno.EISDIR:
        return f"{where} is a folder where a file belongs. Move it aside and rerun the command."
    if code == errno.ENOTDIR:
        return (f"{where}: part of this path is a file where a folder belongs. Move that file aside and rerun "
                f"the command.")
    if code == errno.EEXIST:
        return f"{where} is a file where a folder belongs. Move it aside and rerun the command."
    if code == errno.ENAMETOOLONG:
        return f"{where}: the name is too long for the file system."
    if code == errno.ENOENT:
        return f"{where}: no such file or folder."
    return f"{where}: {exc.strerror or exc}."


QUOTE_LIMIT = 120     # characters of a user's value an error message quotes
MESSAGE_LIMIT = 2000  # characters of one error paragraph: the net under `quoted` for values no message shortened


def elide(text: str, limit: int) -> str:
    """`text` with its middle left out past `limit` characters (how many said), its start and end kept."""
    if len(text) <= limit:
        return text
    head = limit // 2
    return f"{text[:head]}…[{len(text) - 2 * head:,} characters left out]…{text[-head:]}"


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`repr(value)` for an error message, shortened by `elide`, so that a 10 MB string in a config or a record
    makes a one-line message, not a 10 MB one."""
    return elide(repr(value), limit)


def shorten_message(message: str) -> str:
    """An error paragraph cut in the middle past MESSAGE_LIMIT characters: its start names the file or key, its end
    says what to do, and a value echoed in between (a 10 MB path or model name) cannot flood the terminal."""
    return elide(message, MESSAGE_LIMIT)
