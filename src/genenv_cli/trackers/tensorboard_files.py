"""TensorBoard: the run's points as event files, one per stage and epoch, written with TensorBoard's own record
writer and protocol buffers.

Each file is named for its source (`events.out.tfevents.e0003.3-score`: TensorBoard reads any file whose name holds
`tfevents`, in name order, which is the order the stages run) and holds exactly that source's current points, so a
rerun stage replaces its file and never adds a second copy of a step. A file whose points did not change is left
alone (its bytes would be the same: the wall times are the stage's finishing time, not the time of writing); the
file of a source that no longer has points (its stage's manifest gone) is removed. torch's SummaryWriter names its
own files (time, host, pid), which is why the records are written here rather than through it.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from genenv_cli.core.safefiles import read_regular, remove_entry
from genenv_cli.rundir import write_bytes_atomic

PREFIX = "events.out.tfevents."
BUCKETS = 20  # histogram buckets for p̂ per batch (values in [0, 1])


def event_file(points: list[Any]) -> bytes:
    """One event file holding `points` (of one source), step by step."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.histogram.summary_v2 import histogram_pb
    from tensorboard.summary.writer.record_writer import RecordWriter

    buf = io.BytesIO()
    writer = RecordWriter(buf)
    first = min((p.wall for p in points), default=0.0)
    writer.write(Event(wall_time=first, file_version="brain.Event:2").SerializeToString())
    by_step: dict[int, list[Any]] = defaultdict(list)
    for p in points:
        by_step[p.step].append(p)
    for step in sorted(by_step):
        values = []
        for p in sorted(by_step[step], key=lambda p: p.tag):
            if p.histogram:
                values += list(histogram_pb(p.tag, list(p.value), buckets=BUCKETS).value)
            else:
                values.append(Summary.Value(tag=p.tag, simple_value=p.value))
        event = Event(wall_time=by_step[step][0].wall, step=step, summary=Summary(value=values))
        writer.write(event.SerializeToString())
    return buf.getvalue()


def write_event_files(folder: Path, points: list[Any]) -> dict[str, Any]:
    """Make `folder` hold one event file per source with its current points; returns how many were (re)written."""
    by_source: dict[str, list[Any]] = defaultdict(list)
    for p in points:
        by_source[p.source].append(p)
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for source, pts in sorted(by_source.items()):
        path = folder / f"{PREFIX}{source}"
        data = event_file(pts)
        try:
            same = read_regular(path, follow=False) == data
        except (OSError, ValueError):
            same = False
        if not same:
            write_bytes_atomic(path, data)
            written += 1
    gone = [p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.name[len(PREFIX):] not in by_source]
    for p in gone:
        remove_entry(p)
    return {"files": len(by_source), "written": written, "removed": len(gone), "points": len(points)}
