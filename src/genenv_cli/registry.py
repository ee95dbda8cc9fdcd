"""Name -> plugin registries (domains, benchmarks): built-ins plus an entry-point group for users' own.

Built-ins are named as "module:attribute" strings and imported only when asked for, so listing them costs
nothing; an unknown name gets the nearest known one as a suggestion (lm-evaluation-harness does this).
"""

from __future__ import annotations

import importlib
from typing import Any

from genenv_cli.errors import RegistryError


class Registry:
    def __init__(self, kind: str, group: str, builtins: dict[str, str]):
        self.kind = kind
        self.group = group
        self.builtins = builtins
        self._loaded: dict[str, Any] = {}

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
