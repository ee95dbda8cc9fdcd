"""`COMMIT_SUBSCRIBERS`: what follows a stage's commit, one row each, resolved by the commit when it runs.

The contract (`rundir/contract.py`) commits a stage's outputs and manifest and imports none of the modules that act
on a commit: it asks `rundir/commit_hooks.py` for the subscribers of each moment, which reads these rows then, so
whether a commit writes metrics.json or sends the trackers their points depends on the rows alone, never on what a
process happened to import first. A row names its function by "module:function" (imported on the first commit that
needs it: the modules live on floors above the contract) and says when it is called (`when`):

- `derived`: `(run, cfg, epoch, stage, manifest) -> {path: bytes}`, files computed from the epoch's manifests
  (`manifest`, about to be committed, in place of the stage's own; None: the manifests as they are). They are
  committed with the stage's outputs, recovered with them, and rewritten by a no-op run when they no longer match
  (`rundir/metrics.py`: the epoch's metrics.json);
- `before`: `(cfg, what)`, called before a stage does any work; raising stops it (a tracker named but not
  installed);
- `after`: `(run, cfg)`, called under the epoch's lock once a stage is committed or found up to date
  (`trackers/sync.py`: send each tracker the points it lacks; it warns rather than raises, the stage having
  committed).

Rows of one moment are called in the order listed: the built-in rows, then those `COMMIT_SUBSCRIBERS.register`
adds in this process (`register(name, "module:function", when="after")`), then a plugin's, by name: an entry point
of the group `genenv.commit_subscribers` that names a `Row` (`NAME = "module:ROW"`,
`ROW = Row("module:function", {"when": "after"})`). The entry points are read at every commit, so a plugin
installed while a run goes on counts from its next stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genenv_cli.core.errors import RegistryError
from genenv_cli.core.registry import Registry, Row

WHEN = ("derived", "before", "after")


def check_row(name: str, facts: dict[str, Any]) -> None:
    """A subscriber's row says when it is called: `when` is one of WHEN."""
    if facts.get("when") not in WHEN:
        raise RegistryError(f"commit subscriber `{name}`: when {facts.get('when')!r} is refused; expected one of "
                            f"{', '.join(WHEN)}.")


COMMIT_SUBSCRIBERS = Registry("commit subscriber", "genenv.commit_subscribers", {
    "metrics": Row("genenv_cli.rundir.metrics:after_stage", {"when": "derived"}),
    "trackers-installed": Row("genenv_cli.catalogue.trackers:check_installed", {"when": "before"}),
    "trackers": Row("genenv_cli.trackers.sync:publish", {"when": "after"}),
}, check=check_row, plugin_facts=True)


def subscribers(when: str) -> list[Callable[..., Any]]:
    """The functions subscribed to `when` (`derived`, `before` or `after`), in the rows' order, read at each call."""
    if when not in WHEN:
        raise ValueError(f"no commit moment {when!r}; expected one of {', '.join(WHEN)}")
    rows = COMMIT_SUBSCRIBERS.rows
    plugins = sorted(set(COMMIT_SUBSCRIBERS.names()) - set(rows))
    for name in plugins:  # a plugin's entry point must name a Row that says when (its facts were checked on load)
        if "when" not in COMMIT_SUBSCRIBERS.facts(name):
            raise RegistryError(f"commit subscriber plugin `{name}` (group {COMMIT_SUBSCRIBERS.group}) names no "
                                f"row: its entry point must name a genenv_cli.core.registry.Row whose facts say "
                                f"when it is called ({', '.join(WHEN)}).")
    return [COMMIT_SUBSCRIBERS.get(name) for name in [*rows, *plugins]
            if COMMIT_SUBSCRIBERS.facts(name).get("when") == when]
