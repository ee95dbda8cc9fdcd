"""`genenv report`: one self-contained HTML page with the curriculum's charts, plus each chart as a PNG.

    genenv report [--run DIR] [--out FILE]      # default RUN/report/report.html, PNGs beside it

Reads the run (and writes only the report's files): `epochs/NNNN/metrics.json` (keys in `genenv_cli.metrics`),
`epochs/NNNN/task_stats.parquet` (schema in `genenv_cli.pools`) and `evals/<bench>/<model-tag>.json`
(written by `genenv evaluate`; the `*.samples.jsonl` beside them are ignored).

The charts are the views the GenEnv paper (arXiv 2512.19682) uses to show the co-evolution, per epoch:
the agent's success on generated tasks against alpha (the paper's curve, 0.138 -> 0.524 over 6 epochs, is
drawn for reference and labelled as such), the distribution of task p-hat with the band, the share of
tasks in the band, mean R_env, the valid-generation rate, task and response length (the paper: response
length +49% over 6 epochs), the agent's training reward, the environment's KL (epochs stopped by
`env_update.kl_max` marked), a mixed run's numbers per domain (metrics.json's `by_domain`; the section is left
out for a single domain), and benchmark scores across epochs. Under every chart is a table of the
numbers drawn; `build_report` also returns them.

The page opens offline: CSS inline, no script, images embedded as base64 PNG. A null number (a stage that
has not run) is a gap in the chart and "-" in the table, never 0. An epoch without task_stats.parquet is
left out of the p-hat chart and named; a run with no epoch yet gives a page that says so.

Plotting: matplotlib's object API on the Agg canvas (`genenv_cli.report_charts`), imported only when a
report is built.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.config import Config
from genenv_cli.errors import InputError
from genenv_cli.metrics import DOCS, MAPPINGS, SOURCES
from genenv_cli.rundir import REPORT, RunDir, refuse_links_below, write_bytes_atomic, write_text_atomic

# the GenEnv paper's "Curriculum dynamics" figure (the paper: docs/design.md): agent success on generated
# tasks and agent response length, epochs 1-6
PAPER_SUCCESS = [0.138, 0.425, 0.488, 0.505, 0.517, 0.524]
PAPER_RESPONSE_TOKENS = [137, 147, 160, 174, 187, 204]

# (id, heading): the page's sections in order; `<id>.png` is the chart's file
CHARTS: list[tuple[str, str]] = [
    ("success-rate", "Agent success on generated tasks"),
    ("p-task", "Distribution of task p̂ per epoch"),
    ("band-share", "Share of tasks in the band"),
    ("env-reward", "Mean environment reward R_env"),
    ("valid-generation", "Valid-generation rate"),
    ("lengths", "Task length and agent response length"),
    ("agent-reward", "Agent training reward"),
    ("informative", "Informative GRPO groups and environment batches in the band"),
    ("env-kl", "Environment KL to its initial model"),
    ("domains", "By domain"),
    ("evals", "Evaluation scores by benchmark"),
]
HEADINGS = dict(CHARTS)

_BOOL_KEYS = {"env_kl_stopped"}
_NUMBER_KEYS = ["alpha", "band_low", "band_high", *[k for k in SOURCES if k not in _BOOL_KEYS | MAPPINGS]]


# ---------------------------------------------------------------- reading the run

def _number(value: Any, where: str, key: str) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: `{key}` must be a number or null, got {json.dumps(value)[:80]}. It was changed "
                         f"by hand; rerun the epoch's stage that writes it with --force.")
    return None if isinstance(value, float) and not math.isfinite(value) else value


def read_metrics(run: RunDir, epoch: int, cfg: Any = None) -> dict[str, Any] | None:
    """The epoch's numbers with every key present (missing keys and NaN read as null); None when there are none
    yet. Where the epoch has manifests they are taken from them (`metrics.gather`, under `cfg`'s α and band,
    the run's own config when not given), never from a metrics.json that may be stale: that file is derived
    state. Only an epoch without manifests (its numbers kept alone, as archived results are) is read from its
    metrics.json."""
    from genenv_cli.metrics import SOURCES, current

    if any(run.manifest_path(epoch, stage).is_file() for stage, _, _ in SOURCES.values()):
        data = current(run, cfg if cfg is not None else run.load_config(), epoch)
        path = run.manifests_dir(epoch)
    else:
        path = run.metrics_path(epoch)
        data = run.read_metrics_file(epoch)
        if data is None:
            return None
    out: dict[str, Any] = {"epoch": epoch}
    for key in _NUMBER_KEYS:
        out[key] = _number(data.get(key), str(path), key)
    stopped = data.get("env_kl_stopped")
    if stopped is not None and not isinstance(stopped, bool):
        raise InputError(f"{path}: `env_kl_stopped` must be true, false or null, got {json.dumps(stopped)[:80]}.")
    out["env_kl_stopped"] = stopped
    for key in MAPPINGS:
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise InputError(f"{path}: `{key}` must be an object keyed by shape or domain, or null, got "
                             f"{json.dumps(value)[:80]}.")
        out[key] = value
    return out


def read_task_stats(run: RunDir, epoch: int) -> dict[str, list[Any]] | None:
    """p_task, in_band, source and attempts of every task of the epoch; None when score has not run."""
    path = run.file("task_stats", epoch)
    if not path.exists():
        return None
    from genenv_cli.pools import read_parquet

    df = read_parquet(path, "task_stats", columns=["p_task", "in_band", "source", "attempts"])
    return {c: df[c].to_list() for c in df.columns}


def read_evals(run: RunDir) -> list[dict[str, Any]]:
    """Every `evals/<bench>/<model-tag>.json` (`RunDir.read_evals` checks the keys the report uses), as rows."""
    found = []
    for path, data in run.read_evals():
        head, n = data["headline"], data.get("n")
        found.append({
            "bench": data.get("bench") if isinstance(data.get("bench"), str) else path.parent.name,
            "model_tag": data["model_tag"], "epoch": data.get("epoch"), "protocol": data["protocol"],
            "metric": head["name"], "value": _number(head["value"], str(path), "headline.value"),
            "n": n if isinstance(n, int) and not isinstance(n, bool) else None,
            "split": data.get("split"), "version": data.get("version"), "created": data.get("created"),
            "file": run.rel(path), "charted": True,
        })
    return found


# ---------------------------------------------------------------- the numbers behind each chart

def _col(rows: list[dict[str, Any]], key: str) -> list[Any]:
    return [r.get(key) for r in rows]


def _growth(values: list[Any]) -> list[float | None]:
    """Relative change against the first epoch with a value (None where either is missing)."""
    first = next((v for v in values if v is not None), None)
    if not first:
        return [None] * len(values)
    return [None if v is None else v / first - 1.0 for v in values]


def _edges(attempts: list[int]) -> list[float]:
    """Histogram bins centred on the values p-hat can take: k/K when every task had K attempts (K <= 40),
    else 21 bins centred on 0, 0.05, ..., 1."""
    ks = set(attempts)
    k = ks.pop() if len(ks) == 1 else 0
    steps = k if 0 < k <= 40 else 20
    return [(i - 0.5) / steps for i in range(steps + 2)]


def p_task_rows(epochs: list[int], stats: dict[int, dict[str, list[Any]] | None],
                metrics: dict[int, dict[str, Any] | None], cfg: Config) -> tuple[list[dict[str, Any]], list[int]]:
    """Per epoch: tasks by where their p-hat falls (0, below the band, in it, above it, 1), mean and median,
    and the histogram counts drawn. Epochs without task_stats are returned separately."""
    rows, skipped = [], []
    for e in epochs:
        st = stats.get(e)
        if st is None:
            skipped.append(e)
            continue
        m = metrics.get(e) or {}
        lo = m.get("band_low") if m.get("band_low") is not None else cfg.curriculum.band_low
        hi = m.get("band_high") if m.get("band_high") is not None else cfg.curriculum.band_high
        alpha = m.get("alpha") if m.get("alpha") is not None else cfg.curriculum.alpha
        ps, inb = st["p_task"], st["in_band"]
        kinds = Counter()
        for p, b in zip(ps, inb, strict=True):
            kinds["in_band" if b else "zero" if p <= 0 else "one" if p >= 1 else "below" if p < lo else "above"] += 1
        srt = sorted(ps)
        n = len(ps)
        median = None if not n else (srt[n // 2] if n % 2 else (srt[n // 2 - 1] + srt[n // 2]) / 2)
        edges = _edges(st["attempts"])
        counts = [0] * (len(edges) - 1)
        for p in ps:
            i = min(max(int((p - edges[0]) // (edges[1] - edges[0])), 0), len(counts) - 1)
            counts[i] += 1
        rows.append({"epoch": e, "tasks": n, "seed_tasks": sum(s == "seed" for s in st["source"]),
                     "env_tasks": sum(s != "seed" for s in st["source"]),
                     "mean": sum(ps) / n if n else None, "median": median,
                     "zero": kinds["zero"], "below": kinds["below"], "in_band": kinds["in_band"],
                     "above": kinds["above"], "one": kinds["one"],
                     "in_band_share": kinds["in_band"] / n if n else None,
                     "alpha": alpha, "band_low": lo, "band_high": hi,
                     "hist_edges": edges, "hist_counts": counts})
    return rows, skipped


def eval_groups(evals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per benchmark: one series per (protocol, headline metric) over epochs, newest file per epoch (older
    ones are marked not charted), and the references (evals with epoch null)."""
    groups: dict[str, dict[str, Any]] = {}
    for ev in sorted(evals, key=lambda v: (v["bench"], v["protocol"], v["metric"], v["created"] or "")):
        g = groups.setdefault(ev["bench"], {"bench": ev["bench"], "series": {}, "refs": {}})
        if ev["epoch"] is None:
            slot, key = g["refs"], (ev["model_tag"], ev["protocol"], ev["metric"])
        else:
            slot, key = g["series"].setdefault((ev["protocol"], ev["metric"]), {}), ev["epoch"]
        if key in slot:
            slot[key]["charted"] = False  # sorted by created: this one is newer
        slot[key] = ev
    out = []
    for bench in sorted(groups):
        g = groups[bench]
        series = []
        for (protocol, metric), by_epoch in sorted(g["series"].items()):
            xs = sorted(by_epoch)
            series.append({"label": f"{protocol}: {metric}", "protocol": protocol, "metric": metric,
                           "x": xs, "y": [by_epoch[x]["value"] for x in xs]})
        refs = [{"label": f"{tag} ({protocol})", "model_tag": tag, "protocol": protocol, "metric": metric,
                 "value": ev["value"]} for (tag, protocol, metric), ev in sorted(g["refs"].items())]
        out.append({"bench": bench, "series": series, "refs": refs})
    return out


# ---------------------------------------------------------------- HTML

_CSS = """
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


def _esc(v: Any) -> str:
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


def _cell(value: Any, kind: str) -> str:
    classes = " ".join(c for c in ("row" if kind == "str" else "", "na" if value is None else "") if c)
    attr = f' class="{classes}"' if classes else ""
    return f"<td{attr}>{_esc(fmt(value, kind))}</td>"


def _wide_table(epochs: list[int], rows: list[tuple[str, list[Any], str]], first: str = "epoch") -> str:
    """Epochs as columns, one row per series: (label, values, kind)."""
    head = f'<tr><th class="row">{_esc(first)}</th>' + "".join(f"<th>{e}</th>" for e in epochs) + "</tr>"
    body = "".join(f'<tr><th class="row">{_esc(label)}</th>' + "".join(_cell(v, kind) for v in values) + "</tr>"
                   for label, values, kind in rows)
    return f'<div class="scroll"><table>{head}{body}</table></div>'


def _long_table(columns: list[tuple[str, str, str]], rows: list[dict[str, Any]], row_class: Any = None) -> str:
    """One row per record: columns are (key, heading, kind)."""
    head = "<tr>" + "".join(f'<th class="{"row" if kind == "str" else ""}">{_esc(h)}</th>'
                            for _, h, kind in columns) + "</tr>"
    body = []
    for r in rows:
        cls = row_class(r) if row_class else ""
        cells = "".join(_cell(r.get(k), kind) for k, _, kind in columns)
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table>{head}{"".join(body)}</table></div>'


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    return f'<img class="chart" alt="{_esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _section(cid: str, what: str, body: str) -> str:
    return (f'<section id="{cid}"><h2>{_esc(HEADINGS[cid])}</h2>'
            f'<p class="what">{what}</p>{body}</section>')


# ---------------------------------------------------------------- the report

@dataclass
class _Run:
    """What every chart builder reads: the config, the epochs and their numbers, the evaluations."""

    cfg: Config
    epochs: list[int]
    mrows: list[dict[str, Any]]                      # each epoch's metrics.json (gaps as None)
    metrics: dict[int, dict[str, Any] | None]        # as read (None: no metrics.json yet)
    stats: dict[int, dict[str, list[Any]] | None]    # each epoch's task_stats columns
    evals: list[dict[str, Any]]
    mode_note: str                                   # what env.mode leaves out, for the environment's charts

    @property
    def c(self) -> Any:
        return self.cfg.curriculum

    @property
    def band(self) -> tuple[float, float]:
        return (self.c.band_low, self.c.band_high)

    def col(self, key: str) -> list[Any]:
        return _col(self.mrows, key)

    def line(self, cid: str, series: list[Any], decor: Any) -> bytes:
        from genenv_cli import report_charts as ch

        return ch.timeseries(self.epochs, series, decor, title=HEADINGS[cid])


# each builder returns (the numbers behind its chart, the chart's PNG or None, its HTML section)
Built = tuple[Any, bytes | None, str]


def _success_rate(r: _Run) -> Built:
    """The paper's headline curve: success on generated tasks, beside the paper's own."""
    from genenv_cli import report_charts as ch

    c, epochs = r.c, r.epochs
    succ, bpm = r.col("success_rate"), r.col("batch_p_mean")
    paper_x = list(range(1, len(PAPER_SUCCESS) + 1))
    numbers = {"epoch": epochs, "success_rate": succ, "batch_p_mean": bpm,
               "paper": {"epoch": paper_x, "success_rate": PAPER_SUCCESS}}
    png = r.line("success-rate", [
        ch.Series("GenEnv paper, Qwen2.5-7B (reference)", PAPER_SUCCESS, ch.GREY, "--", "s", paper_x,
                  linewidth=1.2, zorder=2),
        ch.Series("success rate (pooled p̂)", succ, ch.BLUE),
        ch.Series("mean p_batch", bpm, ch.PURPLE, ":", "D", linewidth=1.4),
    ], ch.Decor(ylabel="success on generated tasks", ylim=(0, 1), hlines=[(c.alpha, f"α = {c.alpha:g}", ch.RED)],
                band=r.band))
    paper_cells = [PAPER_SUCCESS[e - 1] if 1 <= e <= len(PAPER_SUCCESS) else None for e in epochs]
    return numbers, png, _section(
        "success-rate",
        f"Successful rollouts / rollouts on each epoch's generated tasks, and the mean of the per-batch rates "
        f"p_batch that R_env rewards. The environment is rewarded for keeping them near α = {c.alpha:g}. Dashed "
        f"grey: the GenEnv paper's curve (7B agent, epochs 1-6), for reference only.",
        _img(png, "success rate per epoch")
        + _wide_table(epochs, [("success rate", succ, "num"), ("mean p_batch", bpm, "num"),
                               ("paper (reference)", paper_cells, "num")]))


def _p_task(r: _Run) -> Built:
    """One histogram of task p̂ per epoch."""
    from genenv_cli import report_charts as ch

    c, stats = r.c, r.stats
    prow, skipped = p_task_rows(r.epochs, stats, r.metrics, r.cfg)
    skip_note = "".join(f'<p class="note">Epoch {e}: no task_stats.parquet (score has not run); skipped.</p>'
                        for e in skipped)
    png = None
    if prow:
        png = ch.histograms([{"epoch": row["epoch"], "p_task": stats[row["epoch"]]["p_task"],
                              "source": stats[row["epoch"]]["source"], "alpha": row["alpha"],
                              "band": (row["band_low"], row["band_high"]), "edges": row["hist_edges"],
                              "in_band": row["in_band"]} for row in prow],
                            title=HEADINGS["p-task"])
        table = _long_table([("epoch", "epoch", "int"), ("tasks", "tasks", "int"), ("seed_tasks", "seed", "int"),
                             ("env_tasks", "env", "int"), ("mean", "mean p̂", "num"), ("median", "median p̂", "num"),
                             ("zero", "p̂ = 0", "int"), ("below", "below band", "int"),
                             ("in_band", "in band", "int"), ("above", "above band", "int"),
                             ("one", "p̂ = 1", "int"), ("in_band_share", "in band %", "pct")], prow)
        body = _img(png, "task p-hat histograms per epoch") + table + skip_note
    else:
        body = '<p class="empty">No epoch has task_stats.parquet yet (run <code>genenv score</code>).</p>' + skip_note
    return {"epochs": prow, "skipped": skipped}, png, _section(
        "p-task",
        f"How often the agent solved each task (p̂ = successes / K), one histogram per epoch: seed tasks grey, "
        f"environment tasks blue, the band [{c.band_low:g}, {c.band_high:g}] green, α dashed. Counts in the table "
        f"are by where p̂ falls: never solved, below the band, in it, above it, always solved.", body)


def _band_share(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    c = r.c
    bshare = r.col("band_share")
    png = r.line("band-share", [ch.Series("tasks in band", bshare, ch.GREEN)],
                 ch.Decor(ylabel="share of tasks", percent=True, ylim=(0, 1)))
    return {"epoch": r.epochs, "band_share": bshare}, png, _section(
        "band-share", f"Share of the epoch's tasks whose p̂ is in [{c.band_low:g}, {c.band_high:g}]: the zone "
        f"where the policy gradient p(1-p) is largest.",
        _img(png, "band share per epoch") + _wide_table(r.epochs, [("in band", bshare, "pct")]))


def _env_reward(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    c = r.c
    renv, kept = r.col("env_r_mean"), r.col("env_batches_kept")
    png = r.line("env-reward", [ch.Series("mean R_env", renv, ch.TEAL)],
                 ch.Decor(ylabel="R_env", ylim=(0, 1.05), hlines=[(1.0, "maximum (p_batch = α)", ch.GREY)]))
    return {"epoch": r.epochs, "env_r_mean": renv, "env_batches_kept": kept}, png, _section(
        "env-reward", f"Mean over the epoch's environment batches of R_env = exp(-β (p_batch - α)²), "
        f"β = {c.beta:g}; 1 when a batch's success rate is exactly α. Kept: batches within k_min = {c.k_min:g} "
        f"of α, which the environment trains on.",
        r.mode_note + _img(png, "mean R_env per epoch")
        + _wide_table(r.epochs, [("mean R_env", renv, "num"), ("batches kept", kept, "int")]))


def _valid_generation(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    vgr, env_t, seed_t = r.col("valid_generation_rate"), r.col("env_tasks"), r.col("seed_tasks")
    png = r.line("valid-generation", [ch.Series("valid and novel", vgr, ch.ORANGE)],
                 ch.Decor(ylabel="of generations", percent=True, ylim=(0, 1.02)))
    return {"epoch": r.epochs, "valid_generation_rate": vgr, "env_tasks": env_t, "seed_tasks": seed_t}, png, _section(
        "valid-generation", "Environment generations that became tasks (parsed, valid and novel) / all its "
        "generations.",
        r.mode_note + _img(png, "valid-generation rate per epoch")
        + _wide_table(r.epochs, [("valid rate", vgr, "pct"), ("env tasks", env_t, "int"),
                                 ("seed tasks", seed_t, "int")]))


def _lengths(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    ptok, ctok = r.col("mean_prompt_tokens"), r.col("mean_completion_tokens")
    pg, cg = _growth(ptok), _growth(ctok)
    png = ch.panels(r.epochs, [
        ("task length: agent prompt tokens", [ch.Series("prompt", ptok, ch.PURPLE)], ch.Decor(ylabel="tokens")),
        ("agent response length: completion tokens", [ch.Series("completion", ctok, ch.BLUE)],
         ch.Decor(ylabel="tokens")),
    ])
    numbers = {"epoch": r.epochs, "mean_prompt_tokens": ptok, "mean_completion_tokens": ctok,
               "prompt_growth": pg, "completion_growth": cg}
    return numbers, png, _section(
        "lengths", "Mean agent prompt length (the task, rendered) and mean completion length, in tokens; change "
        "against the first epoch. The paper reports the response length of its 7B agent growing "
        f"{' → '.join(str(v) for v in PAPER_RESPONSE_TOKENS)} tokens (+49%) over 6 epochs.",
        _img(png, "prompt and completion length per epoch")
        + _wide_table(r.epochs, [("prompt tokens", ptok, "tok"), ("change", pg, "signed"),
                                 ("completion tokens", ctok, "tok"), ("change", cg, "signed")]))


def _agent_reward(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    atr, aloss, akl = r.col("agent_train_reward"), r.col("agent_loss"), r.col("agent_kl")
    dlp, skl, trunc = r.col("agent_logp_mismatch"), r.col("agent_sampler_kl"), r.col("agent_is_truncated")
    png = r.line("agent-reward", [ch.Series("train reward", atr, ch.BLUE)],
                 ch.Decor(ylabel="mean R_agent", ylim=(0, 1.02)))
    return {"epoch": r.epochs, "agent_train_reward": atr, "agent_loss": aloss, "agent_kl": akl,
            "agent_logp_mismatch": dlp, "agent_sampler_kl": skl, "agent_is_truncated": trunc}, png, _section(
        "agent-reward", "Mean reward of the samples update-agent trained on (GRPO), with its mean loss and KL "
        "to the reference policy; then how far the rollout engine's logprobs were from the trainer's before the "
        "update (mean |Δ logprob| and KL(sampler ‖ trainer) per token) and the share of tokens whose importance "
        "weight was truncated.",
        _img(png, "agent training reward per epoch")
        + _wide_table(r.epochs, [("train reward", atr, "num"), ("loss", aloss, "g"), ("KL", akl, "g"),
                                 ("sampler |Δ logprob|", dlp, "g"), ("KL(sampler ‖ trainer)", skl, "g"),
                                 ("IS weight truncated", trunc, "pct")]))


def _informative(r: _Run) -> Built:
    """Where GRPO's signal comes from, and whether the environment hits the band."""
    from genenv_cli import report_charts as ch

    c = r.c
    inf, ebb = r.col("informative_share"), r.col("env_batch_band_share")
    png = r.line("informative", [
        ch.Series("informative groups", inf, ch.BLUE),
        ch.Series("env batches in band", ebb, ch.GREEN, "--", "s")],
        ch.Decor(ylabel="share", percent=True, ylim=(0, 1.02)))
    return {"epoch": r.epochs, "informative_share": inf, "env_batch_band_share": ebb}, png, _section(
        "informative", "Share of GRPO groups (a task's K rollouts) whose rewards are not all equal: only these "
        "give the agent a non-zero advantage, and for success rate p that happens with probability "
        "1 - p^K - (1-p)^K, largest at p = ½. Beside it, the share of the environment's batches whose p_batch is "
        f"in [{c.band_low:g}, {c.band_high:g}].",
        _img(png, "informative groups per epoch")
        + _wide_table(r.epochs, [("informative groups", inf, "pct"), ("env batches in band", ebb, "pct")])
        + _shape_tables(r.epochs, r.mrows))


def _env_kl(r: _Run) -> Built:
    from genenv_cli import report_charts as ch

    kl_max = r.cfg.env_update.kl_max
    ekl, stop, eloss = r.col("env_kl"), r.col("env_kl_stopped"), r.col("env_loss")
    finite = [v for v in ekl if v is not None]
    top = max([*finite, kl_max])
    marks = [(e, v if v is not None else top, "stopped by kl_max") for e, v, s in zip(r.epochs, ekl, stop, strict=True)
             if s]
    png = r.line("env-kl", [ch.Series("KL at the end of update-env", ekl, ch.PURPLE)],
                 ch.Decor(ylabel="per-token KL", ylim=(0, None), markers=marks,
                          hlines=[(kl_max, f"kl_max = {kl_max:g}", ch.RED)]))
    mode_note = r.mode_note
    if r.cfg.env.mode != "genenv":
        mode_note = mode_note or (f'<p class="note">env.mode = {_esc(r.cfg.env.mode)}: the environment is never '
                                  f"updated, so there is no KL to show.</p>")
    numbers = {"epoch": r.epochs, "env_kl": ekl, "env_kl_stopped": stop, "env_loss": eloss, "kl_max": kl_max}
    return numbers, png, _section(
        "env-kl", "Mean per-token KL of the environment to its initial model at the end of update-env (RWR). "
        "A red ring marks an epoch whose update stopped because the KL passed env_update.kl_max.",
        mode_note + _img(png, "environment KL per epoch")
        + _wide_table(r.epochs, [("KL", ekl, "g"), ("stopped by kl_max", stop, "bool"), ("loss", eloss, "g")]))


def _evals(r: _Run) -> Built:
    """Evaluation scores; these may exist before any epoch (base-model evaluations)."""
    from genenv_cli import report_charts as ch

    evals = r.evals
    groups = eval_groups(evals)
    png = None
    if groups:
        png = ch.evals(groups, r.epochs, title=HEADINGS["evals"])
        table = _long_table([("bench", "benchmark", "str"), ("protocol", "protocol", "str"),
                             ("model_tag", "model", "str"), ("epoch", "epoch", "int"), ("metric", "metric", "str"),
                             ("value", "score", "score"), ("n", "n", "int"), ("split", "split", "str"),
                             ("created", "created", "str")],
                            sorted(evals, key=lambda v: (v["bench"], v["protocol"], v["epoch"] is not None,
                                                         v["epoch"] or 0, v["created"] or "")),
                            row_class=lambda row: "" if row["charted"] else "old")
        old = "" if all(v["charted"] for v in evals) else \
            '<p class="what">Greyed rows: superseded by a newer evaluation of the same model; not charted.</p>'
        body = _img(png, "evaluation scores per benchmark") + table + old
    else:
        body = ('<p class="empty">No evaluations yet: <code>genenv evaluate</code> writes them into RUN/evals/&lt;bench&gt;/.'
                "</p>")
    return {"groups": groups, "files": evals}, png, _section(
        "evals", "Headline score (%) of each benchmark per epoch's agent, one line per protocol; dashed "
        "horizontal lines are models outside the run (the base model, references).", body)


# (chart id, builder, shown only once an epoch exists), in the page's order (CHARTS)
# a mixed run's per-domain numbers (metrics.json's by_domain) the report tabulates: (key, row label, kind)
DOMAIN_ROWS = [("tasks", "tasks", "int"), ("env_tasks", "env tasks", "int"),
               ("valid_generation_rate", "valid generations", "pct"), ("success_rate", "success rate", "num"),
               ("band_share", "in band", "pct"), ("informative_share", "informative groups", "pct"),
               ("env_r_mean", "mean R_env", "num")]


def _domains(r: _Run) -> Built:
    """A mixed run's success per domain, and its numbers per domain and epoch; nothing for a single domain."""
    from genenv_cli import report_charts as ch

    by = [m.get("by_domain") or {} for m in r.mrows]
    names = sorted({name for d in by for name in d})
    if not r.cfg.run.mixed and not names:
        return None, None, ""

    def col(name: str, key: str) -> list[Any]:
        return [(d.get(name) or {}).get(key) if isinstance(d.get(name), dict) else None for d in by]

    numbers = {"epoch": r.epochs, "domains": {name: {key: col(name, key) for key, _, _ in DOMAIN_ROWS}
                                              for name in names}}
    png = None
    if names:
        png = r.line("domains", [ch.Series(name, col(name, "success_rate"), ch.PALETTE[i % len(ch.PALETTE)])
                                 for i, name in enumerate(names)],
                     ch.Decor(ylabel="success on generated tasks", ylim=(0, 1),
                              hlines=[(r.c.alpha, f"α = {r.c.alpha:g}", ch.RED)], band=r.band))
    rows = [(f"{name}: {label}", col(name, key), kind) for name in names for key, label, kind in DOMAIN_ROWS]
    body = (_img(png, "success rate per domain and epoch") + _wide_table(r.epochs, rows)) if names else \
        '<p class="empty">No per-domain numbers yet (generate-tasks and score write them).</p>'
    return numbers, png, _section(
        "domains", "A mixed run trains one agent on several domains: each domain's share of the epoch's tasks, the "
        "agent's success on them, the share of its tasks in the band and of its GRPO groups that are informative. "
        "The counts add up over the domains to the epoch's totals above.", body)


BUILDERS: list[tuple[str, Callable[[_Run], Built], bool]] = [
    ("success-rate", _success_rate, True),
    ("p-task", _p_task, True),
    ("band-share", _band_share, True),
    ("env-reward", _env_reward, True),
    ("valid-generation", _valid_generation, True),
    ("lengths", _lengths, True),
    ("agent-reward", _agent_reward, True),
    ("informative", _informative, True),
    ("env-kl", _env_kl, True),
    ("domains", _domains, True),
    ("evals", _evals, False),
]


def report_output(run: RunDir, out: Path | None) -> tuple[Path | None, bool]:
    """(where the report goes, moved): `out` when given; else None (RUN/report/report.html, `build_report`'s
    default), or report.html in the user cache when the run is read-only (moved True)."""
    if out is not None:
        return out, False
    folder, moved = run.output_dir(REPORT)
    return (folder / "report.html" if moved else None), moved


def build_report(run: RunDir, cfg: Config, out: Path | None = None) -> dict[str, Any]:
    """Write the HTML report (default RUN/report/report.html) and the chart PNGs beside it.

    Returns {"html": path, "pngs": [paths], "epochs": number of epochs, "numbers": the data behind every
    chart, keyed by chart id, plus "metrics" (every epoch's metrics.json) and "notes"}."""
    from genenv_cli import __version__

    default_dir = run.report_dir
    if out is None:
        refuse_links_below(run.root, default_dir / "report.html", "the report")
        out = default_dir / "report.html"
    elif out.is_dir():
        out = out / "report.html"
    out = out.expanduser().resolve()
    out_dir = out.parent
    out_dir.mkdir(parents=True, exist_ok=True)

    c = cfg.curriculum
    epochs = run.epochs()
    metrics = {e: read_metrics(run, e, cfg) for e in epochs}
    stats = {e: read_task_stats(run, e) for e in epochs}
    evals = read_evals(run)
    notes: list[str] = []
    for e in epochs:
        if metrics[e] is None:
            notes.append(f"Epoch {e}: no metrics.json yet (each stage of the epoch rewrites it when it finishes); "
                         f"its numbers are shown as gaps.")
    mrows = [metrics[e] or {"epoch": e, **{k: None for k in [*_NUMBER_KEYS, *_BOOL_KEYS, *MAPPINGS]}} for e in epochs]
    alphas = {m["alpha"] for m in mrows if m.get("alpha") is not None}
    if alphas - {c.alpha}:
        notes.append(f"Some epochs ran with alpha = {', '.join(f'{a:g}' for a in sorted(alphas))}; the lines show "
                     f"the config's alpha = {c.alpha:g}, the p̂ histograms each epoch's own.")

    numbers: dict[str, Any] = {"epochs": epochs, "metrics": mrows, "notes": notes,
                               "config": {"alpha": c.alpha, "beta": c.beta, "k_min": c.k_min,
                                          "band_low": c.band_low, "band_high": c.band_high,
                                          "kl_max": cfg.env_update.kl_max}}
    mode_note = ""
    if cfg.env.mode == "seeds":
        mode_note = ('<p class="note">env.mode = seeds: no environment model writes tasks, so there are no '
                     "environment generations, rewards or updates to show.</p>")
    inputs = _Run(cfg, epochs, mrows, metrics, stats, evals, mode_note)
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

    # write
    paths = []
    for cid, _ in CHARTS:
        path = out_dir / f"{cid}.png"
        if cid in pngs:
            write_bytes_atomic(path, pngs[cid])
            paths.append(path)
        elif out_dir == default_dir.resolve() and path.exists():
            path.unlink()  # a chart of an earlier report that has no data now
    created = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    page = _page(run, cfg, epochs, mrows, sections, notes, created, __version__)
    write_text_atomic(out, page)
    return {"html": out, "pngs": paths, "epochs": len(epochs), "numbers": numbers}


def _shape_tables(epochs: list[int], mrows: list[dict[str, Any]]) -> str:
    """Per shape and epoch: the environment's mix and the agent's success (from metrics.json's mappings)."""
    mixes = [m.get("env_shape_mix") or {} for m in mrows]
    succ = [m.get("shape_success") or {} for m in mrows]
    shapes = sorted({k for d in mixes + succ for k in d})
    if not shapes:
        return ""
    mix_rows = [(f"env tasks: {sh}", [d.get(sh) if mixes[i] else None for i, d in enumerate(mixes)], "pct")
                for sh in shapes]
    succ_rows = [(f"success: {sh}", [(d.get(sh) or {}).get("p") for d in succ], "num") for sh in shapes]
    return ('<p class="what">By task shape: the share of the environment\'s tasks, and the agent\'s pooled success '
            "on all tasks of that shape.</p>" + _wide_table(epochs, mix_rows + succ_rows))


def _epochs_text(epochs: list[int]) -> str:
    if not epochs:
        return "none yet"
    if epochs == list(range(epochs[0], epochs[-1] + 1)):
        span = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
    else:
        span = ", ".join(map(str, epochs))
    return f"{span} ({len(epochs)} epoch{'s' if len(epochs) != 1 else ''})"


def _page(run: RunDir, cfg: Config, epochs: list[int], mrows: list[dict[str, Any]], sections: list[str],
          notes: list[str], created: str, version: str) -> str:
    c = cfg.curriculum
    domain = (", ".join(f"{name} {100 * share:.0f}%" for name, share in cfg.run.shares().items())
              if cfg.run.mixed else cfg.run.domain)
    meta = [("run", run.root), ("domains" if cfg.run.mixed else "domain", domain), ("env mode", cfg.env.mode),
            ("agent model", cfg.agent.model), ("environment model", cfg.env.model),
            ("curriculum", f"α = {c.alpha:g}, β = {c.beta:g}, k_min = {c.k_min:g}, "
                           f"band [{c.band_low:g}, {c.band_high:g}]"),
            ("epochs", _epochs_text(epochs)), ("generated", f"{created} by genenv {version}")]
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in meta)
    present = [cid for cid, _ in CHARTS if f'<section id="{cid}">' in "".join(sections)]
    nav = "<nav>" + "".join(f'<a href="#{cid}">{_esc(HEADINGS[cid])}</a>' for cid in present)
    nav += '<a href="#all-metrics">All metrics</a></nav>' if epochs else "</nav>"
    parts = [f"<header><h1>GenEnv run report</h1><p class=\"sub\">{_esc(run.root.name)}: "
             f"co-evolution of the agent and its environment, epoch by epoch</p><dl class=\"meta\">{dl}</dl>"
             f"{nav}</header>"]
    if not epochs:
        parts.append('<section id="no-epochs"><h2>No epochs yet</h2><p class="empty">This run has no epoch yet, so '
                     "there is no curriculum to chart. Start one with <code>genenv generate-tasks --epoch 1</code> "
                     "(or <code>stages/coevolve.sh</code>), then run <code>genenv report</code> again.</p></section>")
    parts += [f'<p class="note">{_esc(n)}</p>' for n in notes]
    parts += sections
    if epochs:
        keys = ["alpha", "band_low", "band_high", *[k for k in SOURCES if k not in MAPPINGS]]
        rows = []
        for k in keys:
            kind = "bool" if k in _BOOL_KEYS else "int" if k in ("tasks", "rollouts", "env_tasks", "seed_tasks", "env_batches",
                                                                  "env_batches_kept") else "g"
            vals = [m.get(k) for m in mrows]
            rows.append(f'<tr><th class="row" title="{_esc(DOCS.get(k, k))}">{_esc(k)}</th>'
                        + "".join(_cell(v, kind) for v in vals) + "</tr>")
        head = '<tr><th class="row">epoch</th>' + "".join(f"<th>{e}</th>" for e in epochs) + "</tr>"
        parts.append('<section id="all-metrics"><h2>All metrics</h2><p class="what">Every key of each epoch\'s '
                     "metrics.json (hover a name for its meaning; docs: genenv_cli/metrics.py).</p>"
                     f'<div class="scroll"><table>{head}{"".join(rows)}</table></div></section>')
    parts.append(f"<footer>Written by <code>genenv report</code> from {_esc(run.root)}. Self-contained: the charts "
                 "are embedded, and each is also saved beside this file as a PNG.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>GenEnv report: {_esc(run.root.name)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
