"""`report_page`: every section built from the run's numbers and the page around them, in memory (`genenv report`,
`actions/report.py`, writes it: the HTML page and each chart's PNG beside it)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.metrics import DOCS, MAPPINGS, sources
from genenv_cli.views.report.html import CSS, cell, esc
from genenv_cli.views.report.read import _BOOL_KEYS, number_keys, read_evals, read_metrics, read_task_stats
from genenv_cli.views.report.sections import BUILDERS, CHARTS, HEADINGS, _Run


@dataclass
class ReportPage:
    """The report built in memory: the page, each chart's PNG by chart id, and the numbers behind them."""
    html: str
    pngs: dict[str, bytes]
    epochs: list[int]
    epochs_text: str
    numbers: dict[str, Any]


def report_page(run: RunDir, cfg: Config) -> ReportPage:
    """Every section built from the run's numbers and the page around them. `numbers` holds the data behind every
    chart, keyed by chart id, plus "epochs", "metrics" (every epoch's metrics.json, a row of nulls where an epoch
    has none yet), "notes" and "config"."""
    from genenv_cli.core.version import __version__
    from genenv_cli.views.report.episodes import read_episodes

    c = cfg.curriculum
    epochs = run.epochs()
    metrics = {e: read_metrics(run, e, cfg) for e in epochs}
    stats = {e: read_task_stats(run, e) for e in epochs}
    evals = read_evals(run)
    mrows, notes = _metric_rows(epochs, metrics, c.alpha)
    numbers: dict[str, Any] = {"epochs": epochs, "metrics": mrows, "notes": notes,
                               "config": {"alpha": c.alpha, "beta": c.beta, "k_min": c.k_min,
                                          "band_low": c.band_low, "band_high": c.band_high,
                                          "kl_max": cfg.env_update.kl_max}}
    mode_note = ""
    if cfg.env.mode == "seeds":
        mode_note = ('<p class="note">env.mode = seeds: no environment model writes tasks, so there are no '
                     "environment generations, rewards or updates to show.</p>")
    inputs = _Run(cfg, epochs, mrows, metrics, stats, evals, mode_note, {e: read_episodes(run, e) for e in epochs})
    pngs: dict[str, bytes] = {}
    sections: list[str] = []
    for cid, build, needs_epoch in BUILDERS:
        if needs_epoch and not epochs:
            continue
        numbers[cid], png, section = build(inputs)
        if png is not None:
            pngs[cid] = png
        if section:
            sections.append(section)
    created = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    complete = complete_epochs(run, epochs)
    html = _page(run, cfg, epochs, mrows, sections, notes, created, __version__, complete)
    return ReportPage(html, pngs, epochs, _epochs_text(epochs, complete), numbers)


def _metric_rows(epochs: list[int], metrics: dict[int, dict[str, Any] | None],
                 alpha: float) -> tuple[list[dict[str, Any]], list[str]]:
    """(each epoch's metrics.json, a row of nulls where there is none yet; the notes on what is missing or drawn
    with another alpha)."""
    notes: list[str] = []
    for e in epochs:
        if metrics[e] is None:
            notes.append(f"Epoch {e}: no metrics.json yet (each stage of the epoch rewrites it when it finishes); "
                         f"its numbers are shown as gaps.")
    mrows = [metrics[e] or {"epoch": e, **{k: None for k in [*number_keys(), *_BOOL_KEYS, *MAPPINGS]}} for e in epochs]
    alphas = {m["alpha"] for m in mrows if m.get("alpha") is not None}
    if alphas - {alpha}:
        notes.append(f"Some epochs ran with alpha = {', '.join(f'{a:g}' for a in sorted(alphas))}; the lines show "
                     f"the config's alpha = {alpha:g}, the p̂ histograms each epoch's own.")
    return mrows, notes


def complete_epochs(run: RunDir, epochs: list[int]) -> list[int]:
    """The epochs every stage of has finished (its manifest written), and those kept as results alone (a
    metrics.json and no manifest, as archived results are)."""
    from genenv_cli.catalogue.stages import available, epoch_stages

    stages = [s for s in epoch_stages() if available(s)]
    done = []
    for e in epochs:
        present = [run.manifest_path(e, s).exists() for s in stages]
        if all(present) or (not any(present) and run.metrics_path(e).exists()):
            done.append(e)
    return done


def _epochs_text(epochs: list[int], complete: list[int] | None = None) -> str:
    """The report's epochs line: the span, and how many of them are complete.

    >>> _epochs_text([1, 2], [1]), _epochs_text([1, 2], [1, 2]), _epochs_text([1], [])
    ('1-2 (1 complete; epoch 2 not finished)', '1-2 (2 epochs)', '1 (0 complete; epoch 1 not finished)')
    """
    if not epochs:
        return "none yet"
    if epochs == list(range(epochs[0], epochs[-1] + 1)):
        span = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
    else:
        span = ", ".join(map(str, epochs))
    unfinished = [e for e in epochs if complete is not None and e not in complete]
    if not unfinished:
        return f"{span} ({len(epochs)} epoch{'s' if len(epochs) != 1 else ''})"
    return (f"{span} ({len(epochs) - len(unfinished)} complete; epoch{'s' if len(unfinished) > 1 else ''} "
            f"{', '.join(map(str, unfinished))} not finished)")


def _page(run: RunDir, cfg: Config, epochs: list[int], mrows: list[dict[str, Any]], sections: list[str],
          notes: list[str], created: str, version: str, complete: list[int]) -> str:
    c = cfg.curriculum
    domain = (", ".join(f"{name} {100 * share:.0f}%" for name, share in cfg.run.shares().items())
              if cfg.run.mixed else cfg.run.domain)
    meta = [("run", run.root), ("domains" if cfg.run.mixed else "domain", domain), ("env mode", cfg.env.mode),
            ("agent model", cfg.agent.model), ("environment model", cfg.env.model),
            ("curriculum", f"α = {c.alpha:g}, β = {c.beta:g}, k_min = {c.k_min:g}, "
                           f"band [{c.band_low:g}, {c.band_high:g}]"),
            ("epochs", _epochs_text(epochs, complete)), ("generated", f"{created} by genenv {version}")]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta)
    present = [cid for cid, _ in CHARTS if f'<section id="{cid}">' in "".join(sections)]
    nav = "<nav>" + "".join(f'<a href="#{cid}">{esc(HEADINGS[cid])}</a>' for cid in present)
    nav += '<a href="#all-metrics">All metrics</a></nav>' if epochs else "</nav>"
    parts = [f"<header><h1>GenEnv run report</h1><p class=\"sub\">{esc(run.root.name)}: "
             f"co-evolution of the agent and its environment, epoch by epoch</p><dl class=\"meta\">{dl}</dl>"
             f"{nav}</header>"]
    if not epochs:
        parts.append('<section id="no-epochs"><h2>No epochs yet</h2><p class="empty">This run has no epoch yet, so '
                     "there is no curriculum to chart. Start one with <code>genenv generate-tasks --epoch 1</code> "
                     "(or <code>pipelines/coevolve.sh</code>), then run <code>genenv report</code> again.</p></section>")
    parts += [f'<p class="note">{esc(n)}</p>' for n in notes]
    parts += sections
    if epochs:
        keys = ["alpha", "band_low", "band_high", *[k for k in sources() if k not in MAPPINGS]]
        rows = []
        for k in keys:
            kind = "bool" if k in _BOOL_KEYS else "int" if k in ("tasks", "rollouts", "env_tasks", "seed_tasks", "env_batches",
                                                                  "env_batches_kept") else "g"
            vals = [m.get(k) for m in mrows]
            rows.append(f'<tr><th class="row" title="{esc(DOCS.get(k, k))}">{esc(k)}</th>'
                        + "".join(cell(v, kind) for v in vals) + "</tr>")
        head = '<tr><th class="row">epoch</th>' + "".join(f"<th>{e}</th>" for e in epochs) + "</tr>"
        parts.append('<section id="all-metrics"><h2>All metrics</h2><p class="what">Every key of each epoch\'s '
                     "metrics.json (hover a name for its meaning; docs: genenv_cli/rundir/metrics.py).</p>"
                     f'<div class="scroll"><table>{head}{"".join(rows)}</table></div></section>')
    parts.append(f"<footer>Written by <code>genenv report</code> from {esc(run.root)}. Self-contained: the charts "
                 "are embedded, and each is also saved beside this file as a PNG.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>GenEnv report: {esc(run.root.name)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
