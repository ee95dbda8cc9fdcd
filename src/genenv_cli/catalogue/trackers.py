"""`run.report_to`: the run's curves in TensorBoard, Weights & Biases or trackio, under one tracker run per genenv run.

    genenv init runs/exp1 --domain arith --set 'run.report_to=["tensorboard"]'
    tensorboard --logdir runs/exp1/trackers/tensorboard        # the curves, while the run goes on

What is logged (`figures.py`): each epoch's numbers as the manifests record them, at step = the epoch (`epoch/...`:
p̂ per batch as a histogram and its mean, the in-band shares, R_env, batches kept, the valid-generation rate,
informative groups, the updates' means); each update's per-step figures (`update-agent/...`, `update-env/...`:
loss, KL, clip and importance-weight fractions, gradient norm, learning rate) at step = the optimizer step counted
over the run's updates of that model; and each evaluation's headline score (`evaluate/<bench>`) at its epoch.

The points are derived from the run's files, as metrics.json is: after every stage (its commit, or a run that
found it up to date) and every evaluation, genenv works out every point of the run and sends each tracker what it
does not have yet, so a run that names a tracker late, or one whose stage was rerun, catches up, and a stage's
points never appear twice:
- TensorBoard: one event file per stage and epoch (`trackers/tensorboard/events.out.tfevents.e0003.3-score`),
  rewritten whole when its points change, so a rerun stage overwrites its points;
- W&B and trackio keep what was logged first: genenv records the points it sent (`trackers/<name>.json`) and a
  rerun's points at a step already logged are skipped (and counted in the warning line).
One tracker run per genenv run: W&B's run id and trackio's run name are kept in `trackers/run.json`.

Each tracker is an optional extra (`pip install 'genenv-cli[tensorboard]'`), imported only when named. One that is
named but not installed is refused by `genenv init` and by every stage and evaluation before any work, naming the
extra. A tracker that fails after a stage committed (no network, a full disk) does not undo the stage: a warning
says so, and the next stage or evaluation sends what is missing.

Why not transformers' own `report_to` inside the updates: its callbacks key points by the trainer's global step,
which restarts at 1 in every update process (every epoch's update would land on steps 1..n of one tracker run), and
they see only Trainer's log (loss, gradient norm, learning rate), not the KL, clip and importance-weight figures
genenv's losses record per step; points they send before a failed update commits cannot be taken back.

Each tracker is one row of `TRACKERS` below: the function that sends it points ("module:function", imported only
when the tracker is named) and what is known without importing it: the package that must be importable, the pip
extra that installs it (pyproject's optional-dependencies; the noxfile installs the same), how it takes points
(`files`: it rewrites its own folder of RUN/trackers/ from every point, `send(folder, points)`; `append`: it gets
only the points it has not had, `send(folder, identity, points, cfg)`, and genenv keeps the ledger) and its folder
under RUN/trackers/, if any. `TRACKERS.register` adds one for this process; the entry-point group
`genenv.trackers` adds a plugin's, whose entry point names a `Row` with these facts (or the send function, whose
package is then taken to be its name). Publishing after every stage is `trackers/sync.py`'s.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from genenv_cli.core.errors import ConfigError, RegistryError
from genenv_cli.core.registry import NAME, Registry, Row


def check_row(name: str, facts: dict[str, Any]) -> None:
    """A tracker's row, refused at registration when it would write outside RUN/trackers/: its `folder` is a
    relative path of plain names (no `..`, no absolute path, no `~`), and `takes` is `files` or `append`. (Links
    under the folder are refused when the tracker is sent points: `trackers/sync.py`.)"""
    folder = facts.get("folder")
    if folder is not None:
        parts = folder.split("/") if isinstance(folder, str) else []
        if not parts or not all(NAME.fullmatch(p) for p in parts):
            raise RegistryError(f"tracker `{name}`: folder {folder!r} is refused; a tracker's folder is a relative "
                                f"path of plain names inside RUN/trackers/ (no `..`, no absolute path), since "
                                f"genenv writes there.")
    if facts.get("takes", "append") not in ("files", "append"):
        raise RegistryError(f"tracker `{name}`: takes {facts.get('takes')!r} is refused; expected \"files\" or "
                            f"\"append\".")


TRACKERS = Registry("tracker", "genenv.trackers", {
    "tensorboard": Row("genenv_cli.trackers.tensorboard_files:write_event_files",
                       {"package": "tensorboard", "extra": "tensorboard", "takes": "files", "folder": "tensorboard"}),
    "wandb": Row("genenv_cli.trackers.wandb_run:log_points",
                 {"package": "wandb", "extra": "wandb", "takes": "append", "folder": "wandb"}),
    "trackio": Row("genenv_cli.trackers.trackio_run:log_points",
                   {"package": "trackio", "extra": "trackio", "takes": "append"}),
}, check=check_row, plugin_facts=True)


def known(name: str) -> bool:
    """Whether `name` is a tracker (a row, else a plugin: the entry points are read only then)."""
    return name in TRACKERS.rows or name in TRACKERS.names()


def missing(cfg: Any) -> list[str]:
    """The trackers `run.report_to` names that are not installed (found without importing them)."""
    return [name for name in cfg.run.report_to
            if importlib.util.find_spec(TRACKERS.facts(name).get("package", name)) is None]


def check_installed(cfg: Any, what: str = "this command") -> None:
    """Refuse, before any work, a tracker that is named but not installed, naming the extra to install."""
    absent = missing(cfg)
    if absent:
        extras = ",".join(TRACKERS.facts(name).get("extra", name) for name in absent)
        raise ConfigError(f"run.report_to names {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} not "
                          f"installed, so {what} would run without {'its' if len(absent) == 1 else 'their'} curves. "
                          f"Install {'it' if len(absent) == 1 else 'them'}: pip install 'genenv-cli[{extras}]' (or "
                          f"take {'it' if len(absent) == 1 else 'them'} out of run.report_to in genenv.toml).")
