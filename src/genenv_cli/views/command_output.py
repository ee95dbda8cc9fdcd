"""What the commands show: a stage's one-line summary and its `--json` fields (from its manifest), `genenv status`
(its table is built in status_table.py) and `genenv evaluate`'s tables.
Imported only when something is shown; rich only when a rich table is."""

from __future__ import annotations

import json
import sys
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.stages import stage_module
from genenv_cli.machinery.pruning import disk_lines
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StageResult
from genenv_cli.views import status_table as status


def benchmark_table(rows: list[dict[str, Any]]) -> Any:
    """`genenv evaluate --list`: name, what, categories and splits, where the data comes from."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="genenv evaluate --bench NAME")
    for col in ("name", "what", "categories / splits", "data from"):
        table.add_column(col, overflow="fold")
    for r in rows:
        cats = ", ".join(r["categories"][:12]) + (" ..." if len(r["categories"]) > 12 else "")
        splits = f"\nsplits: {', '.join(r['splits'])}" if r["splits"] else ""
        table.add_row(r["name"], escape(r["description"]), escape(cats + splits), escape("\n".join(r["sources"])))
    return table


def eval_table(result: dict[str, Any]) -> Any:
    """One evaluation's metrics per category and overall."""
    from rich.markup import escape
    from rich.table import Table

    summary = result["summary"]
    table = Table(title=escape(f"{result['bench']} ({result['protocol']}) — {result['model_tag']} — {result['version']}"))
    overall = summary.get("overall", {})
    metrics = [k for k, v in overall.items() if isinstance(v, int | float) and k != "n"][:6]
    table.add_column("category")
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_column("n", justify="right")

    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)

    for cat, vals in summary.get("categories", {}).items():
        table.add_row(escape(str(cat)), *[cell(vals.get(m)) for m in metrics], cell(vals.get("n")))
    table.add_row("[bold]overall[/]", *[cell(overall.get(m)) for m in metrics], cell(overall.get("n")))
    return table


def print_status(run: RunDir, cfg: Config, *, as_json: bool) -> None:
    """`genenv status`: JSON for scripts; else the table (rich on a terminal, aligned plain text off one, without
    rich's import and layout cost), a mixed run's lines per domain, the disk used, and why a stage is not done."""
    rows = status.collect(run, cfg)
    if as_json:
        print(json.dumps({"run": str(run.root), "epochs": rows}, indent=2, default=str))
        return
    if not rows:
        print(f"{run.root}: no epoch started yet. Next: genenv generate-tasks --epoch 1")
        return
    lines = status.domain_lines(rows, cfg) + disk_lines(run)
    notes = status.stale_notes(rows, cfg)
    if not sys.stdout.isatty():
        print("\n".join([status.render_plain(rows, run, cfg), *lines, *notes]))
        return
    from rich.console import Console

    console = Console()
    console.print(status.render(rows, run, cfg))
    for line in lines:
        console.print(line, highlight=False)
    for note in notes:
        console.print(note, style="yellow")


def print_benchmarks(rows: list[dict[str, Any]], *, as_json: bool) -> None:
    """`genenv evaluate --list`."""
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console

    Console(width=160).print(benchmark_table(rows))


def print_eval_table(result: dict[str, Any]) -> None:
    """One evaluation's table, on stderr (stdout keeps the summary line)."""
    from rich.console import Console

    Console(stderr=True).print(eval_table(result))


def summarize(result: StageResult) -> tuple[dict[str, Any], str]:
    """(fields for --json, one line for people): the line is the stage's own `summary` of its manifest."""
    m = result.manifest or {}
    counts, metrics = m.get("counts", {}), m.get("metrics", {})
    fields = {"skipped": result.skipped, "seconds": m.get("seconds"), **counts, **metrics,
              "outputs": [o["path"] for o in m.get("outputs", {}).values()]}
    if result.skipped:
        return fields, result.message
    module = stage_module(result.stage)
    said = module.summary(counts, metrics) if hasattr(module, "summary") else "done"
    text = f"{result.stage} epoch {result.epoch}: {said} in {m.get('seconds', 0):.1f}s"
    outs = ", ".join(fields["outputs"][:4])
    return fields, text + (f"; wrote {outs}" if outs else "")
