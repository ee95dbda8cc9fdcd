"""Checks a run's TensorBoard curves (`run.report_to = ["tensorboard"]`; the demo runs it): TensorBoard's own reader
finds, for every epoch, each number of its metrics.json once, at step = the epoch, equal to the manifests', and no
tag anywhere holds a step twice. Prints what it found; exits 1 naming what differs.

    python tests/check_trackers.py RUN_DIR
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

SKIP = {"epoch", "alpha", "band_low", "band_high"}


def check(root: Path) -> tuple[list[str], list[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = root / "trackers" / "tensorboard"
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags["scalars"]}
    problems, found = [], []
    twice = {t: [s for s, n in Counter(s for s, _ in pts).items() if n > 1] for t, pts in scalars.items()}
    problems += [f"{t}: steps {s} more than once" for t, s in twice.items() if s]
    epochs = sorted(int(p.name) for p in (root / "epochs").iterdir() if (p / "metrics.json").is_file())
    checked = 0
    for epoch in epochs:
        metrics = json.loads((root / "epochs" / f"{epoch:04d}" / "metrics.json").read_text())
        for key, value in metrics.items():
            if key in SKIP or isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                continue
            got = [v for s, v in scalars.get(f"epoch/{key}", []) if s == epoch]
            if len(got) != 1 or not math.isclose(got[0], value, rel_tol=1e-6, abs_tol=1e-9):
                problems.append(f"epoch {epoch} {key}: metrics.json {value}, TensorBoard {got}")
            checked += 1
    files = sorted(p.name for p in folder.iterdir())
    found.append(f"{len(files)} event files in {folder}: {', '.join(f.split('.', 3)[3] for f in files)}")
    found.append(f"{len(scalars)} scalar tags and {len(tags['tensors'])} histogram(s) read back by TensorBoard's "
                 f"EventAccumulator; {sum(len(p) for p in scalars.values())} points, no step twice in any tag"
                 if not any(twice.values()) else "a step appears twice")
    found.append(f"{checked} epoch figures over epochs {epochs} each found once, equal to metrics.json")
    updates = {t: len(p) for t, p in scalars.items() if t.endswith("/loss") and not t.startswith("epoch/")}
    found.append(f"update curves: {updates}")
    return problems, found


if __name__ == "__main__":
    problems, found = check(Path(sys.argv[1]))
    for line in found:
        print(f"trackers check: {line}")
    for line in problems:
        print(f"trackers check: FAILED: {line}", file=sys.stderr)
    sys.exit(1 if problems else 0)
