"""Name -> plugin registries (domains, benchmarks): built-ins plus an entry-point group for users' own.

Each built-in is one row: its "module:attribute" string, imported only when asked for (so listing them costs
nothing), and the facts the rest of genenv reads without importing it (a domain's output lengths, whether it is a
benchmark family; where the project's tests find its test answers). A new component is its own files plus one
row; `register` adds a row at run time (a test's throwaway domain, a script's own suite). An unknown name gets the
nearest known one as a suggestion (lm-evaluation-harness does this).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from genenv_cli.errors import RegistryError


@dataclass(frozen=True)
class Row:
    """One registered component: where it lives ("module:attribute") and what is known of it without loading it."""

    target: str
    facts: dict[str, Any] = field(default_factory=dict)


class Registry:
    def __init__(self, kind: str, group: str, rows: dict[str, str | Row]):
        self.kind = kind
        self.group = group
        self.rows = {name: row if isinstance(row, Row) else Row(row) for name, row in rows.items()}
        self.builtins = {name: row.target for name, row in self.rows.items()}
        self._loaded: dict[str, Any] = {}

    def register(self, name: str, target: str, **facts: Any) -> None:
        """Add (or replace) the row `name` for this process: `target` is "module:attribute"."""
        self.rows[name] = Row(target, facts)
        self.builtins[name] = target
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        self.rows.pop(name, None)
        self.builtins.pop(name, None)
        self._loaded.pop(name, None)

    def facts(self, name: str) -> dict[str, Any]:
        """What the row of `name` says besides its target; {} for a plugin from the entry-point group."""
        row = self.rows.get(name)
        return dict(row.facts) if row is not None else {}

    def _entry_points(self) -> dict[str, Any]:
        from importlib.metadata import entry_points  # slow to import: only when a name is not built in

        return {ep.name: ep for ep in entry_points(group=self.group)}

    def names(self) -> list[str]:
        return sorted(set(self.builtins) | set(self._entry_points()))

    def get(self, name: str) -> Any:
        """The registered object (a class or instance factory) for `name`."""
        if name in self._loaded:
            return self._loaded[name]
        if name in self.builtins:
            module, attr = self.builtins[name].split(":")
            obj = getattr(importlib.import_module(module), attr)
        else:
            eps = self._entry_points()
            if name not in eps:
                import difflib

                close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.5)
                hint = f" Did you mean `{close[0]}`?" if close else ""
                raise RegistryError(f"unknown {self.kind} `{name}`.{hint} Known: {', '.join(self.names())}. "
                                    f"Plugins register under the `{self.group}` entry-point group.")
            obj = eps[name].load()
        self._loaded[name] = obj
        return obj
