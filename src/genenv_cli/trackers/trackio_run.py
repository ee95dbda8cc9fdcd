"""trackio: the points genenv has not sent yet, logged to the trackio run of this genenv run (named in
trackers/run.json, resumed by every stage's process) in the project `run.tracker_project`. Each point is logged at its
own step (the epoch, or the update's step), which trackio stores as given. trackio keeps its runs where it always
does (`TRACKIO_DIR`, else the Hugging Face cache): `trackio show --project genenv` opens them.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


def log_points(folder: Path, ident: dict[str, str], points: list[Any], cfg: Any) -> None:
    import trackio

    trackio.init(project=cfg.run.tracker_project, name=ident["name"], resume="allow", config=cfg.to_dict(),
                 embed=False, auto_log_gpu=False, auto_log_cpu=False)
    try:
        rows: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
        for p in points:
            group = "epoch" if p.tag.split("/", 1)[0] in ("epoch", "evaluate") else p.tag.split("/", 1)[0]
            rows[group, p.step][p.tag] = trackio.Histogram(list(p.value)) if p.histogram else p.value
        for (_, step), values in sorted(rows.items(), key=lambda kv: (kv[0][0] != "epoch", kv[0][1], kv[0][0])):
            trackio.log(values, step=step)
    finally:
        trackio.finish()
