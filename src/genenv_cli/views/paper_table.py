"""Table 1 of the GenEnv paper, measured: the headline of each benchmark's results file in RUN/evals beside the
paper's reference rows. Measured cells come only from `genenv evaluate` results; the reference rows are the
`paper_column.reference` of each evaluation suite, labelled as such. The columns are the registered suites that
declare a `paper_column`, in its order."""

from __future__ import annotations

from typing import Any

from genenv_cli.rundir import RunDir


def columns() -> list[tuple[str, str, dict[str, float]]]:
    """(title, benchmark name, paper reference) of every registered suite with a column in the paper's Table 1,
    in the paper's order."""
    from genenv_cli.catalogue.suites import BENCHMARKS

    found = []
    for bench in BENCHMARKS.names():
        col = BENCHMARKS.get(bench).paper_column
        if col is not None:
            found.append((col.position, col.title, bench, dict(col.reference)))
    return [(title, bench, ref) for _, title, bench, ref in sorted(found, key=lambda c: (c[0], c[2]))]


def _latest(run: RunDir, bench: str, protocol: str, tag: str | None) -> dict[str, Any] | None:
    """The result for `protocol` (and model tag, if given) of the latest epoch, newest file on a tie; results
    of a `--limit` subset are not the benchmark's number and are left out."""
    best = None
    for _, result in run.read_evals(bench):
        if result["protocol"] != protocol or result.get("config", {}).get("limit"):
            continue
        if tag is not None and result.get("model_tag") != tag:
            continue
        key = (result.get("epoch") or 0, result.get("created", ""))
        if best is None or key > best[0]:
            best = (key, result)
    return best[1] if best else None


def table_rows(run: RunDir, protocol: str = "paper", tag: str | None = None) -> dict[str, Any]:
    """{"columns": [(title, bench)], "measured": {bench: value or None}, "model_tags": {...},
    "reference": {model: {bench: value}}, "protocol": ...}."""
    cols = columns()
    measured: dict[str, float | None] = {}
    tags: dict[str, str] = {}
    for _, bench, _ in cols:
        result = _latest(run, bench, protocol, tag)
        value = result["headline"]["value"] if result else None
        measured[bench] = float(value) if isinstance(value, (int, float)) else None
        if result:
            tags[bench] = result.get("model_tag", "")
    reference: dict[str, dict[str, float]] = {}
    for _, bench, rows in cols:
        for model, value in rows.items():
            reference.setdefault(model, {})[bench] = value
    return {"columns": [(title, bench) for title, bench, _ in cols], "measured": measured, "model_tags": tags,
            "reference": reference, "protocol": protocol}


def _avg(cells: list[float | None]) -> float | None:
    return None if any(c is None for c in cells) else sum(cells) / len(cells)  # type: ignore[arg-type]


def render_table(rows: dict[str, Any]) -> str:
    """Markdown, Table 1's layout: measured first, then the paper's rows marked as reference."""
    cols = rows["columns"]
    head = "| model | " + " | ".join(c for c, _ in cols) + " | avg |"
    lines = [head, "|" + "---|" * (len(cols) + 2)]

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    cells = [rows["measured"][b] for _, b in cols]
    tags = sorted(set(rows["model_tags"].values())) or ["no results"]
    lines.append(f"| this run ({', '.join(tags)}) | " + " | ".join(fmt(v) for v in cells) + f" | {fmt(_avg(cells))} |")
    for model, ref in rows["reference"].items():
        ref_cells = [ref.get(b) for _, b in cols]
        lines.append(f"| {model} (paper, reference) | " + " | ".join(fmt(v) for v in ref_cells)
                     + f" | {fmt(_avg(ref_cells))} |")
    missing = [c for c, b in cols if rows["measured"][b] is None]
    if missing:
        lines.append(f"\nno `--protocol {rows['protocol']}` result in the run for: {', '.join(missing)} "
                     f"(run `genenv evaluate --bench NAME --protocol {rows['protocol']} --run RUN`).")
    return "\n".join(lines)
