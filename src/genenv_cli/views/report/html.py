"""The report's HTML kit, shared with `genenv compare`: escaping, how a cell shows a value, the two table
layouts, a PNG embedded as base64, and the stylesheet (inline, so a page opens offline)."""

from __future__ import annotations

import base64
import html
from typing import Any

CSS = """
:root { --fg:#24292f; --muted:#57606a; --line:#d0d7de; --bg:#f6f8fa; --accent:#1f6feb; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color:var(--fg); }
main { max-width: 940px; margin: 0 auto; padding: 24px 20px 60px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 4px; padding-top: 8px; }
header .sub { color: var(--muted); margin: 0 0 12px; }
dl.meta { display:grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 14px;
          background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin:0; font-family: ui-monospace, Menlo, monospace;
          font-size: 13px; word-break: break-all; }
nav { display: flex; flex-wrap: wrap; gap: 2px 14px; margin: 0 0 8px; font-size: 13px; }
nav a { color: var(--accent); text-decoration: none; white-space: nowrap; }
section { border-top: 1px solid var(--line); padding: 14px 0 18px; }
p.what { color: var(--muted); margin: 0 0 10px; }
img.chart { display:block; width:100%; max-width: 900px; height:auto; margin: 6px 0 8px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; margin: 4px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: var(--bg); font-weight: 600; }
th.row, td.row { text-align: left; }
td.na { color: #8c959f; }
tr.old td { color: #8c959f; font-style: italic; }
.note { background: #fff8c5; border: 1px solid #d4a72c66; border-radius: 6px; padding: 6px 10px; margin: 8px 0;
        font-size: 13px; }
.empty { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: 10px; }
"""


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt(value: Any, kind: str = "num") -> str:
    """How a table cell shows a value: pct (fraction as %), signed (relative change), num (3 decimals),
    tok (1 decimal), score (1 decimal), g (4 significant digits), int, bool, str; None is '-'."""
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "signed":
        return f"{100 * value:+.0f}%"
    if kind == "num":
        return f"{value:.3f}"
    if kind in ("tok", "score"):
        return f"{value:.1f}"
    if kind == "g":
        return f"{value:.4g}"
    if kind == "bool":
        return "yes" if value else "no"
    return str(value)


def cell(value: Any, kind: str) -> str:
    classes = " ".join(c for c in ("row" if kind == "str" else "", "na" if value is None else "") if c)
    attr = f' class="{classes}"' if classes else ""
    return f"<td{attr}>{esc(fmt(value, kind))}</td>"


def wide_table(epochs: list[int], rows: list[tuple[str, list[Any], str]], first: str = "epoch") -> str:
    """Epochs as columns, one row per series: (label, values, kind)."""
    head = f'<tr><th class="row">{esc(first)}</th>' + "".join(f"<th>{e}</th>" for e in epochs) + "</tr>"
    body = "".join(f'<tr><th class="row">{esc(label)}</th>' + "".join(cell(v, kind) for v in values) + "</tr>"
                   for label, values, kind in rows)
    return f'<div class="scroll"><table>{head}{body}</table></div>'


def long_table(columns: list[tuple[str, str, str]], rows: list[dict[str, Any]], row_class: Any = None) -> str:
    """One row per record: columns are (key, heading, kind)."""
    head = "<tr>" + "".join(f'<th class="{"row" if kind == "str" else ""}">{esc(h)}</th>'
                            for _, h, kind in columns) + "</tr>"
    body = []
    for r in rows:
        cls = row_class(r) if row_class else ""
        cells = "".join(cell(r.get(k), kind) for k, _, kind in columns)
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table>{head}{"".join(body)}</table></div>'


def img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    return f'<img class="chart" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'

