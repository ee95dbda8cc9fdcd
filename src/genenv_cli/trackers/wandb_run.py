"""Weights & Biases: the points genenv has not sent yet, logged to the one W&B run of this genenv run (its id kept
in trackers/run.json, resumed by every stage's process). W&B's own step only grows, and a resumed run's processes
each count from where they start, so the x of every chart is a step metric of its own (`define_metric`): `epoch`
for the epoch figures and evaluations, `update-agent/step` and `update-env/step` for the updates' curves. Online or
offline is W&B's choice (`WANDB_MODE`, `wandb offline`); its files go to RUN/trackers/wandb/.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from genenv_cli.trackers.figures import STEP_KEYS


def _axis(tag: str) -> str:
    group = tag.split("/", 1)[0]
    return STEP_KEYS.get(group, "epoch")


def log_points(folder: Path, ident: dict[str, str], points: list[Any], cfg: Any) -> None:
    import wandb

    (folder / "wandb").mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=cfg.run.tracker_project, id=ident["id"], name=ident["name"], resume="allow",
                     dir=str(folder), config=cfg.to_dict(), settings=wandb.Settings(console="off", quiet=True))
    try:
        run.define_metric("epoch")
        run.define_metric("epoch/*", step_metric="epoch")
        run.define_metric("evaluate/*", step_metric="epoch")
        for group, axis in STEP_KEYS.items():
            run.define_metric(axis)
            run.define_metric(f"{group}/*", step_metric=axis)
        rows: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
        for p in points:
            axis = _axis(p.tag)
            rows[axis, p.step][p.tag] = wandb.Histogram(list(p.value)) if p.histogram else p.value
        for (axis, step), values in sorted(rows.items(), key=lambda kv: (kv[0][0] != "epoch", kv[0][1], kv[0][0])):
            run.log({axis: step, **values})
    finally:
        run.finish()
