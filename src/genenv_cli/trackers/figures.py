"""What the trackers are sent: every point of a run, worked out from its manifests, update curves and evaluations.

A point is (tag, step, value) with the stage and epoch it comes from (its `source`, which names the TensorBoard file
that holds it) and a wall time (when that stage finished, so a rewritten file is byte for byte the same when the
points are). Epoch figures are at step = the epoch; an update's per-step figures at its steps counted over the run's
updates of that model (epoch 2's first step follows epoch 1's last); an evaluation at its checkpoint's epoch (0:
the base model).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.stages import STAGES
from genenv_cli.rundir import RunDir

EVALUATE = "evaluate"


def order(stage: str) -> int:
    """A stage's place in the epoch (generate-tasks 1 ... update-env 5, stages registered in this process where
    their rows put them), then the evaluations."""
    names = [*STAGES, EVALUATE]
    return names.index(stage) + 1
# an update's per-step columns sent, and the rows that count as steps (update-env's stopping row was not taken)
STEP_COLUMNS = {
    "update-agent": ("agent_update_steps", ["loss", "policy_loss", "kl", "clip_frac", "ratio_mean", "ratio_dev_max",
                                            "is_weight_mean", "is_truncated", "grad_norm", "learning_rate"]),
    "update-env": ("env_update_steps", ["loss", "nll", "kl", "grad_norm", "learning_rate"]),
}
STEP_KEYS = {"update-agent": "update-agent/step", "update-env": "update-env/step"}  # W&B's x for each group


@dataclass(frozen=True)
class Point:
    tag: str
    step: int
    value: float | tuple[float, ...]   # a number, or the values of a histogram
    wall: float
    source: str                        # "e0003.3-score": the stage and epoch it comes from

    @property
    def key(self) -> str:
        return f"{self.tag}@{self.step}"

    @property
    def histogram(self) -> bool:
        return isinstance(self.value, tuple)


def source_name(epoch: int, stage: str) -> str:
    """`e0003.3-score`: sorts as the stages run (TensorBoard's own loader reads a folder's files in name order)."""
    return f"e{epoch:04d}.{order(stage)}-{stage}"


def _wall(stamp: Any) -> float:
    try:
        return time.mktime(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return 0.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def run_points(run: RunDir, cfg: Config) -> list[Point]:
    """Every point of the run as its files have it now."""
    points: list[Point] = []
    offsets = {stage: 0 for stage in STEP_COLUMNS}
    for epoch in run.epochs():
        manifests = run.manifests(epoch)
        for stage, manifest in manifests.items():
            if stage in STAGES and isinstance(manifest, dict):
                points += _epoch_figures(run, epoch, stage, manifest)
                if stage in STEP_COLUMNS:
                    steps = _step_figures(run, epoch, stage, manifest, offsets[stage])
                    offsets[stage] = max([offsets[stage], *(p.step for p in steps)])
                    points += steps
    points += _evaluations(run, cfg)
    return points


def _epoch_figures(run: RunDir, epoch: int, stage: str, manifest: dict[str, Any]) -> list[Point]:
    src, wall = source_name(epoch, stage), _wall(manifest.get("finished"))
    out = []
    for key, (part, name) in STAGES[stage].metrics.items():
        value = (manifest.get(part) or {}).get(name)
        if isinstance(value, dict):  # by shape: one curve per shape (the shape mix; the agent's success per shape)
            for sub, v in sorted(value.items()):
                v = v.get("p") if isinstance(v, dict) else v
                if (n := _number(v)) is not None:
                    out.append(Point(f"epoch/{key}/{sub}", epoch, n, wall, src))
        elif (n := _number(value)) is not None:
            out.append(Point(f"epoch/{key}", epoch, n, wall, src))
    if stage == "score":
        batches = _env_batch_p(run, epoch)
        if batches:
            out.append(Point("epoch/p_batch", epoch, tuple(batches), wall, src))
    return out


def _env_batch_p(run: RunDir, epoch: int) -> list[float]:
    """p̂ of every environment batch of the epoch (one per batch), from score's task_stats."""
    from genenv_cli.rundir.datafiles import read_parquet

    path = run.file("task_stats", epoch)
    if not path.is_file():
        return []
    df = read_parquet(path, "task_stats", columns=["batch_id", "source", "p_batch"])
    env = df.filter(df["source"] != "seed").unique(subset="batch_id", keep="first", maintain_order=True)
    return [float(p) for p in env["p_batch"].to_list() if p is not None and math.isfinite(p)]


def _step_figures(run: RunDir, epoch: int, stage: str, manifest: dict[str, Any], offset: int) -> list[Point]:
    from genenv_cli.rundir.datafiles import read_parquet

    key, columns = STEP_COLUMNS[stage]
    path = run.file(key, epoch)
    if not path.is_file() or not (manifest.get("outputs") or {}).get(key):
        return []
    df = read_parquet(path, key)
    if "applied" in df.columns:
        df = df.filter(df["applied"])
    src, wall = source_name(epoch, stage), _wall(manifest.get("finished"))
    out = []
    for row in df.iter_rows(named=True):
        step = offset + int(row["step"])
        for c in columns:
            if c in row and (n := _number(row[c])) is not None:
                out.append(Point(f"{stage}/{c}", step, n, wall, src))
    return out


def _evaluations(run: RunDir, cfg: Config) -> list[Point]:
    """Each `genenv evaluate` result's headline at its checkpoint's epoch (0: the base agent model); of several
    results for one benchmark, protocol and epoch (a --limit run beside a whole one), the one over the most samples."""
    best: dict[tuple[str, int], tuple[int, str, Point]] = {}
    for _, data in run.read_evals():
        if data.get("stage") in STAGES:  # eval-agent's: sent with its epoch's figures (epoch/heldout_success ...)
            continue
        epoch = data.get("epoch")
        model = data.get("model") if isinstance(data.get("model"), dict) else {}
        if epoch is None and not model.get("adapter") and _is_base(str(model.get("path")), str(model.get("tag")),
                                                                  cfg.agent.model):
            epoch = 0
        value = _number((data.get("headline") or {}).get("value"))
        if not isinstance(epoch, int) or isinstance(epoch, bool) or value is None:
            continue
        protocol = data.get("protocol") or "official"
        tag = f"evaluate/{data.get('bench')}" + ("" if protocol == "official" else f"-{protocol}")
        n = data.get("n") if isinstance(data.get("n"), int) else 0
        created = str(data.get("created") or "")
        point = Point(tag, epoch, value, _wall(created), source_name(epoch, EVALUATE))
        if (tag, epoch) not in best or (n, created) > best[tag, epoch][:2]:
            best[tag, epoch] = (n, created, point)
    return [p for _, _, p in best.values()]


def _is_base(path: str, tag: str, base: str) -> bool:
    """Whether an evaluation's model is the run's base agent: `embedded` by name, a hub id as its own path, a local
    folder by its resolved path (how `models.resolve` records each), whatever the result's file is named."""
    from pathlib import Path

    if base in (tag, path):
        return True
    folder = Path(base).expanduser()
    return folder.is_dir() and str(folder.resolve()) == path
