"""Name -> plugin registries (domains, benchmarks, trackers, engines, commit subscribers): built-ins plus an
entry-point group for users' own.

Each built-in is one row: its "module:attribute" string, imported only when asked for (so listing them costs
nothing), and the facts the rest of genenv reads without importing it (a domain's output lengths, whether it is a
benchmark family; where the project's tests find its test answers). A new component is its own files plus one
row; `register` adds a row at run time (a test's throwaway domain, a script's own suite), kept apart from
the built-ins; a plugin's entry point names its object, or its `Row` when it has facts to give. An unknown name gets the
nearest known one as a suggestion (lm-evaluation-harness does this).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from genenv_cli.core.errors import RegistryError

IMPORT_LIMIT_S = 600.0  # the time a plugin's module gets to import when its row is read (as a plugin suite's)
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")  # a component's name: it names files and folders of a run


def check_name(kind: str, name: Any) -> None:
    """RegistryError unless `name` is an identifier: a letter, then letters, digits, `_` or `-`, at most 64 in all
    (never a path: `..`, `/` and the like are refused)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        raise RegistryError(f"{kind} name {shown} is refused: a name is a letter, then letters, digits, `_` or `-` "
                            f"(at most 64), since it names the run's files and folders.")


@dataclass(frozen=True)
class Row:
    """One registered component: where it lives ("module:attribute") and what is known of it without loading it."""

    target: str
    facts: dict[str, Any] = field(default_factory=dict)


class Registry:
    """`builtins`: the rows the project ships, fixed when the registry is made; `added`: rows `register` added in
    this process (a test's throwaway component, a script's own suite), which take precedence over a built-in of the
    same name; then the entry-point group. Looked-up objects and instances are cached per name, and forgotten when
    the name is registered again or unregistered."""

    def __init__(self, kind: str, group: str, rows: dict[str, str | Row],
                 check: Callable[[str, dict[str, Any]], None] | None = None, plugin_facts: bool = False):
        self.kind = kind
        self.check = check  # refuses a row's facts at registration (RegistryError with the reason)
        self.group = group
        self.plugin_facts = plugin_facts  # whether a plugin's row may give facts (its entry point loaded to read them)
        self.builtins: dict[str, Row] = {name: row if isinstance(row, Row) else Row(row) for name, row in rows.items()}
        self.added: dict[str, Row] = {}
        self._loaded: dict[str, Any] = {}
        self._instances: dict[str, Any] = {}
        self._plugin_rows: dict[str, Row] = {}

    @property
    def rows(self) -> dict[str, Row]:
        """Every row known without the entry points: the built-ins, with the added rows over them."""
        return {**self.builtins, **self.added}

    def register(self, name: str, target: str, **facts: Any) -> None:
        """Add (or replace) the row `name` for this process: `target` is "module:attribute". A name that is not an
        identifier, a target that is not "module:attribute", or facts the registry's `check` refuses (a tracker's
        folder outside the run) are refused here, with the reason."""
        check_name(self.kind, name)
        if not isinstance(target, str) or target.count(":") != 1:
            raise RegistryError(f"{self.kind} `{name}`: target {target!r} is refused; expected \"module:attribute\".")
        if self.check is not None:
            self.check(name, facts)
        self.added[name] = Row(target, dict(facts))
        self.forget(name)

    def unregister(self, name: str) -> None:
        """Remove a row `register` added (a built-in stays), and forget what was looked up under its name."""
        self.added.pop(name, None)
        self.forget(name)

    def forget(self, name: str) -> None:
        """Drop the cached object and instance of `name`: the next lookup reads the rows again."""
        self._loaded.pop(name, None)
        self._instances.pop(name, None)
        self._plugin_rows.pop(name, None)

    def origin(self, name: str) -> str:
        """Where the row of `name` comes from: "added" (at run time), "built in", or "plugin" (an entry point)."""
        return "added" if name in self.added else "built in" if name in self.builtins else "plugin"

    def facts(self, name: str) -> dict[str, Any]:
        """What the row of `name` says besides its target: a plugin's are those of the `Row` its entry point names
        (read only where `plugin_facts`: elsewhere, as for a plugin whose entry point names its object, {}: a domain's
        or a suite's facts are its class's, read under the plugin guard, never by loading it here)."""
        row = self.rows.get(name)
        if row is None and self.plugin_facts:
            row = self.plugin_row(name)
        return dict(row.facts) if row is not None else {}

    def plugin_row(self, name: str) -> Row | None:
        """The row of the plugin `name` from the entry-point group, or None when no entry point has that name.

        An entry point names either the plugin's object ("module:function") or a `Row` (target and facts, like a
        built-in's: the tracker's package, the engine's `lora`, the subscriber's `when`), which is checked as
        `register` checks a row. The entry point is loaded here, under the plugin guard where `plugin_facts` (an
        import that raises, exits or hangs past IMPORT_LIMIT_S is a PluginError naming the plugin), so a plugin
        whose object is heavy keeps its `Row` in a light module of its own."""
        if name in self._plugin_rows:
            return self._plugin_rows[name]
        ep = self._entry_points().get(name)
        if ep is None:
            return None
        where = f"{self.kind} plugin `{name}` (entry point {ep.value} in {self.group})"
        check_name(where, name)
        if self.plugin_facts:  # its row is read outside any guard of the caller's: the import is guarded here
            from genenv_cli.core.plugin_guard import guard

            obj = guard(where, "loading (import)", ep.load, IMPORT_LIMIT_S)
        else:  # a domain or suite plugin is loaded under its caller's guard, which names its import error
            obj = ep.load()
        if isinstance(obj, Row):
            if not isinstance(obj.target, str) or obj.target.count(":") != 1:
                raise RegistryError(f"{where}: its row's target {obj.target!r} is refused; expected "
                                    f"\"module:attribute\".")
            if self.check is not None:
                self.check(name, dict(obj.facts))
            row = obj
        else:
            row = Row(ep.value)
            self._loaded[name] = obj
        self._plugin_rows[name] = row
        return row

    def _entry_points(self) -> dict[str, Any]:
        from importlib.metadata import entry_points  # slow to import: only when a name is not built in

        return {ep.name: ep for ep in entry_points(group=self.group)}

    def names(self) -> list[str]:
        return sorted(set(self.rows) | set(self._entry_points()))

    def get(self, name: str) -> Any:
        """The registered object (a class or instance factory) for `name`."""
        if name in self._loaded:
            return self._loaded[name]
        row = self.rows.get(name) or self.plugin_row(name)
        if row is None:
            import difflib

            close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.5)
            hint = f" Did you mean `{close[0]}`?" if close else ""
            raise RegistryError(f"unknown {self.kind} `{name}`.{hint} Known: {', '.join(self.names())}. "
                                f"Plugins register under the `{self.group}` entry-point group.")
        if name in self._loaded:  # a plugin whose entry point named its object: plugin_row loaded it
            return self._loaded[name]
        module, attr = row.target.split(":")
        obj = getattr(importlib.import_module(module), attr)
        self._loaded[name] = obj
        return obj

    def instance(self, name: str) -> Any:
        """One instance per process of the class registered as `name` (a domain caches its data)."""
        if name not in self._instances:
            self._instances[name] = self.get(name)()
        return self._instances[name]
