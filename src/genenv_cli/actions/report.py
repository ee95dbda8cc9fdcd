"""`genenv report`: the run's report written, the HTML page (default RUN/report/report.html) and each chart's PNG
beside it. The page itself, what it shows and how it is drawn, is `views/report/`'s (`report_page`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.safefiles import refuse_links_below, refuse_overlap
from genenv_cli.rundir import REPORT, RunDir, write_bytes_atomic, write_text_atomic
from genenv_cli.views.report.build import report_page
from genenv_cli.views.report.sections import CHARTS


def report_output(run: RunDir, out: Path | None) -> tuple[Path | None, bool]:
    """(where the report goes, moved): `out` when given; else None (RUN/report/report.html, `build_report`'s
    default), or report.html in the user cache when the run is read-only (moved True)."""
    if out is not None:
        return out, False
    folder, moved = run.output_dir(REPORT)
    return (folder / "report.html" if moved else None), moved


def build_report(run: RunDir, cfg: Config, out: Path | None = None) -> dict[str, Any]:
    """Write the HTML report (default RUN/report/report.html) and the chart PNGs beside it.

    Returns {"html": path, "pngs": [paths], "epochs": number of epochs (begun), "epochs_text": which, and how many
    of them are complete, "numbers": the data behind every
    chart, keyed by chart id, plus "metrics" (every epoch's metrics.json) and "notes"}."""
    default_dir = run.report_dir
    if out is None:
        refuse_links_below(run.root, default_dir / "report.html", "the report")
        out = default_dir / "report.html"
    elif out.is_dir():
        out = out / "report.html"
    if out != default_dir / "report.html":  # its PNGs go beside it: inside the run, only in the report's folder
        refuse_overlap(out, run.root, "--out", "the report", allowed=default_dir)
    out = out.expanduser().resolve()
    out_dir = out.parent
    out_dir.mkdir(parents=True, exist_ok=True)

    built = report_page(run, cfg)
    paths = []
    for cid, _ in CHARTS:
        path = out_dir / f"{cid}.png"
        if cid in built.pngs:
            write_bytes_atomic(path, built.pngs[cid])
            paths.append(path)
        elif out_dir == default_dir.resolve() and path.exists():
            path.unlink()  # a chart of an earlier report that has no data now
    write_text_atomic(out, built.html)
    return {"html": out, "pngs": paths, "epochs": len(built.epochs), "epochs_text": built.epochs_text,
            "numbers": built.numbers}
