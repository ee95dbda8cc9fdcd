"""Libraries' own warnings kept out of a command's output: Python warnings (transformers' and torch's deprecation
notices) and records of the standard `logging` module, transformers' included once `route_transformers_logging`
has run, go to the command's log (RUN/logs/<command>.log) as "library: ..." lines, not to the terminal.
`genenv --verbose` (or GENENV_VERBOSE=1) prints them as well."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _ToLog(logging.Handler):
    def __init__(self, ui: Any, verbose: bool):
        super().__init__(logging.WARNING)
        self.ui, self.verbose = ui, verbose

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"library: {record.name} {record.levelname.lower()}: {record.getMessage()}"
        except Exception:  # noqa: BLE001 - a library's malformed record must not end the command
            return
        self.ui.log(text)
        if self.verbose and not self.ui.quiet:
            print(text, file=self.ui.stream, flush=True)


def verbose() -> bool:
    """Whether the user asked to see the log's lines too: `genenv --verbose`, or GENENV_VERBOSE set and not 0."""
    return os.environ.get("GENENV_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")


@contextmanager
def library_output_to_log(ui: Any) -> Iterator[None]:
    """While it lasts, Python warnings and WARNING records of `logging` go to `ui`'s log (and, with
    GENENV_VERBOSE=1, to its stream)."""
    handler = _ToLog(ui, verbose())
    root = logging.getLogger()
    shown = warnings.showwarning

    def to_log(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
               line: Any = None) -> None:
        handler.handle(logging.LogRecord("py.warnings", logging.WARNING, filename, lineno,
                                         "%s: %s (%s:%s)", (category.__name__, message, filename, lineno), None))

    root.addHandler(handler)
    warnings.showwarning = to_log
    try:
        yield
    finally:
        warnings.showwarning = shown
        root.removeHandler(handler)


def route_transformers_logging() -> None:
    """transformers prints its records through its own handler on stderr; hand them to the standard `logging`
    tree instead, where `library_output_to_log` takes them. Call it once transformers is imported anyway."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()
