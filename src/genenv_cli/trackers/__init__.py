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
"""

from __future__ import annotations

import importlib.util
from typing import Any

from genenv_cli.commit_hooks import AFTER, BEFORE, subscribe
from genenv_cli.config import TRACKERS, Config
from genenv_cli.errors import ConfigError

# tracker -> (the module imported to use it, the extra that installs it)
MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
assert set(MODULES) == set(TRACKERS)


def missing(cfg: Config) -> list[str]:
    """The trackers `run.report_to` names that are not installed (found without importing them)."""
    return [name for name in cfg.run.report_to if importlib.util.find_spec(MODULES[name]) is None]


def check_installed(cfg: Config, what: str = "this command") -> None:
    """Refuse, before any work, a tracker that is named but not installed, naming the extra to install."""
    absent = missing(cfg)
    if absent:
        extras = ",".join(absent)
        raise ConfigError(f"run.report_to names {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} not "
                          f"installed, so {what} would run without {'its' if len(absent) == 1 else 'their'} curves. "
                          f"Install {'it' if len(absent) == 1 else 'them'}: pip install 'genenv-cli[{extras}]' (or "
                          f"take {'it' if len(absent) == 1 else 'them'} out of run.report_to in genenv.toml).")


def publish(run: Any, cfg: Config, ui: Any = None) -> dict[str, Any]:
    """Send every tracker in `run.report_to` the run's points it does not have yet; returns what each got. Never
    raises for a tracker's own failure (the stage before it has committed): it warns and the next call retries."""
    if not cfg.run.report_to:
        return {}
    from genenv_cli.trackers.sync import sync

    return sync(run, cfg, ui)


# every stage: refused before any work when a named tracker is missing, and published after its commit
subscribe(BEFORE, check_installed)
subscribe(AFTER, publish)
