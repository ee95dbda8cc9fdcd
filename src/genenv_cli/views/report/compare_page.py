"""The page `genenv compare` writes: the arms, the flags, and per claim the difference from the baseline, then each
arm's own numbers, each figure with its table (epochs down, arms across, a mean and its 95% interval per cell)."""

from __future__ import annotations

from typing import Any

from genenv_cli.views.report.html import CSS, esc, img

PAGE_CSS = CSS + """
h3 { font-size: 14px; margin: 14px 0 2px; }
td.clear { font-weight: 600; }
td.clear.up { color: #1a7f37; } td.clear.down { color: #cf222e; }
"""

WHAT = {
    "in-band": "The share of the environment's task batches whose success rate p_batch lies in {band}: what the "
               "α-curriculum rewards the environment for.",
    "task-band": "The share of all tasks (seeds included) whose p_task lies in {band}.",
    "informative": "The share of GRPO groups (a task's K rollouts) whose rewards are not all equal: only these give "
                   "the agent a gradient.",
    "heldout": "The agent's greedy success on the domain's held-out validation tasks after each epoch; epoch 0 (0 "
               "rollouts) is the base model. Each arm's own curve is drawn against the agent rollouts consumed.",
}
# what would record a chart's number, where a run lacks it (the others are the epochs' own numbers)
NOT_RECORDED = {
    "heldout": " The eval-agent stage records it as each epoch ends: run.eval_every = 1 and run.eval_benches = "
               "[\"heldout\"] in genenv.toml (the defaults); with them set, `genenv run --epochs N` also evaluates "
               "the epochs already run. `genenv evaluate --bench heldout --epoch N` evaluates one epoch on every "
               "held-out item (`--epoch 0`: the base model).",
}
DIFF_TEXT = ("The arm minus its baseline, per epoch: the line is the mean difference over seeds, paired by run.seed "
             "where both arms ran the seed, and the band its 95% interval (Student's t). Where the band stays clear "
             "of the zero line the seeds' spread does not explain the difference (bold in the table).")
OWN_TEXT = ("Each arm's mean over its seeds with its 95% interval; with more than three arms, one panel per arm with "
            "its baseline in grey.")


def cell_text(mean: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    """A share as a table cell: `23.0% [12.1, 33.9]`, a difference in points: `+3.6 [-13.6, +20.9]`.

    >>> cell_text(0.23, 0.121, 0.339)
    '23.0% [12.1, 33.9]'
    >>> cell_text(0.036, -0.136, 0.209, signed=True)
    '+3.6 [-13.6, +20.9]'
    >>> cell_text(0.5, None, None)
    '50.0%'
    """
    if mean is None:
        return "-"
    f = (lambda v: f"{100 * v:+.1f}") if signed else (lambda v: f"{100 * v:.1f}")
    head = f(mean) + ("" if signed else "%")
    return head if low is None or high is None else f"{head} [{f(low)}, {f(high)}]"


def _cell(mean: Any, low: Any, high: Any, signed: bool) -> str:
    cls = ""
    if signed and low is not None and high is not None and (low > 0 or high < 0):
        cls = ' class="clear up"' if low > 0 else ' class="clear down"'
    return f"<td{cls}>{esc(cell_text(mean, low, high, signed))}</td>"


def epoch_table(columns: dict[str, dict[str, Any]], heads: dict[str, str], signed: bool = False,
                rollouts: dict[str, dict[str, Any]] | None = None) -> str:
    """Epochs down, one column per series (its head from `heads`), each cell a mean and its interval. `rollouts`
    (held-out success): a column of the rollouts consumed by each epoch where every arm agrees."""
    epochs = sorted({e for s in columns.values() for e in s["epoch"]})
    if not epochs:
        return '<p class="empty">No run records it.</p>'
    index = {name: {e: i for i, e in enumerate(s["epoch"])} for name, s in columns.items()}
    head = '<tr><th class="row">epoch</th>' + ("<th>rollouts</th>" if rollouts else "") + "".join(
        f"<th>{esc(heads[name])}</th>" for name in columns) + "</tr>"
    rows = []
    for e in epochs:
        cells = []
        if rollouts:
            seen = {s["rollouts"][s["epoch"].index(e)] for s in rollouts.values() if e in s["epoch"]}
            cells.append(f"<td>{int(next(iter(seen))):,}</td>" if len(seen) == 1 and None not in seen
                         else '<td class="na">varies</td>')
        for name, s in columns.items():
            i = index[name].get(e)
            cells.append('<td class="na">-</td>' if i is None else _cell(s["mean"][i], s["low"][i], s["high"][i], signed))
        rows.append(f'<tr><th class="row">{e}</th>{"".join(cells)}</tr>')
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def mix_tables(mixes: dict[str, dict[str, Any]]) -> str:
    """One table per arm: epochs down, shapes across."""
    from genenv_cli.views.report.html import fmt

    out = []
    for label, m in mixes.items():
        if not m["mix"]:
            out.append(f'<h3>{esc(label)}</h3><p class="empty">No environment tasks.</p>')
            continue
        head = '<tr><th class="row">epoch</th>' + "".join(f"<th>{esc(s)}</th>" for s in m["mix"]) + "</tr>"
        rows = "".join(f'<tr><th class="row">{e}</th>'
                       + "".join(f"<td>{esc(fmt(vals[i], 'pct'))}</td>" for vals in m["mix"].values()) + "</tr>"
                       for i, e in enumerate(m["epoch"]))
        out.append(f'<h3>{esc(label)}</h3><div class="scroll"><table>{head}{rows}</table></div>')
    return "".join(out)


def _runs_head(label: str, series: dict[str, Any]) -> str:
    n = max(series["n"], default=0)
    return f"{label} ({n} run{'s' if n != 1 else ''})"


def page(arms: list[dict[str, Any]], charts: list[tuple[str, str]], pairs: dict[str, str], flags: list[str],
         numbers: dict[str, Any], pngs: dict[str, bytes], band: tuple[float, float] | None) -> str:
    """The HTML. `arms`: one {"label", "seeds", "paths"} per arm; `charts`: (section id, title) in page order."""
    band_text = f"[{band[0]:g}, {band[1]:g}]" if band else "the runs' band"
    arm_rows = "".join(
        f'<tr><td class="row">{esc(a["label"])}</td><td class="row">{esc(pairs.get(a["label"], "(baseline)"))}</td>'
        f'<td>{len(a["seeds"])}</td><td>{esc(", ".join(map(str, a["seeds"])))}</td>'
        f'<td class="row">{esc(", ".join(a["paths"]))}</td></tr>' for a in arms)
    nav = " ".join(f'<a href="#{cid}">{esc(title)}</a>' for cid, title in charts)
    parts = ["<header><h1>genenv compare</h1>"
             f"<p>{len(arms)} arm(s) from {sum(len(a['seeds']) for a in arms)} run(s). Runs equal in every setting but "
             "run.seed form an arm; each arm is compared with its baseline.</p></header>",
             f"<nav>{nav}</nav>",
             '<section id="arms"><h2>Arms</h2><div class="scroll"><table><tr><th class="row">arm</th>'
             '<th class="row">compared with</th><th>runs</th><th>run.seed of each run</th><th class="row">run directories</th>'
             f"</tr>{arm_rows}</table></div></section>"]
    parts += [f'<p class="note flag">⚠ {esc(f)}</p>' for f in flags]
    for cid, title in charts:
        body = [f'<section id="{cid}"><h2>{esc(title)}</h2>']
        if cid == "shape-mix":
            body.append('<p class="what">Per arm, the share of each task shape among the environment\'s tasks, epoch '
                        "by epoch (mean over seeds). An environment that learns to aim moves its mix toward the "
                        "shapes the agent solves about half the time.</p>")
            body.append(img(pngs.get(cid), title) + mix_tables(numbers[cid]))
        else:
            nums = numbers[cid]
            body.append(f'<p class="what">{esc(WHAT[cid].format(band=band_text))}</p>')
            if cid not in pngs:
                body.append(f'<p class="empty">None of these runs records it.{esc(NOT_RECORDED.get(cid, ""))}</p>'
                            "</section>")
                parts.append("".join(body))
                continue
            if nums["differences"]:
                heads = {label: f"{label} − {pairs[label]}" + ("" if all(d["paired"]) else " (unpaired)")
                         for label, d in nums["differences"].items()}
                body.append(f'<h3>Arm minus baseline</h3><p class="what">{esc(DIFF_TEXT)}</p>'
                            + img(pngs.get(f"{cid}-diff"), f"{title}: arm minus baseline")
                            + epoch_table(nums["differences"], heads, signed=True))
            heads = {label: _runs_head(label, s) for label, s in nums["arms"].items()}
            body.append(f'<h3>Each arm</h3><p class="what">{esc(OWN_TEXT)}</p>' + img(pngs.get(cid), title)
                        + epoch_table(nums["arms"], heads,
                                      rollouts=nums["arms"] if cid == "heldout" else None))
        body.append("</section>")
        parts.append("".join(body))
    parts.append("<footer>Written by <code>genenv compare</code>. Self-contained: the charts are embedded, and each "
                 "is also saved beside this file as a PNG.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>genenv compare</title><style>{PAGE_CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
