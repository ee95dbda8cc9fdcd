"""What follows a stage's commit: the subscribers the contract calls, read from their rows when it calls them.

The contract (contract.py) imports none of the modules that act on a commit (metrics.json's, the trackers'): their
rows are in `catalogue/commit_subscribers.py`, which says what each moment (`derived`, `before`, `after`) is
called with, and each row's function is imported by name when a commit first needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genenv_cli.catalogue.commit_subscribers import subscribers as _rows_of


def subscribers(when: str) -> list[Callable[..., Any]]:
    """The functions subscribed to `when` (`derived`, `before` or `after`), in their rows' order, as the rows are
    at this call (a row registered after this process imported genenv counts)."""
    return _rows_of(when)
